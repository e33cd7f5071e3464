"""Idempotency-Key validation, body fingerprints and what a repeated key answers."""

from __future__ import annotations

import json
import random

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook_service.api.idempotency import (
    HEADER,
    MAX_KEY_LENGTH,
    fingerprint,
    outcome_problem,
    validate_key,
)
from webhook_service.api.problems import CONTENT_TYPE, ProblemError
from webhook_service.store.events import IngestOutcome

# -- validate_key -----------------------------------------------------------------------------


def test_no_header_means_no_key() -> None:
    assert validate_key(None) is None


@pytest.mark.parametrize(
    "key",
    [
        "a",
        "8e03978e-40d5-43e8-bc93-6894a57f9324",
        "a" * MAX_KEY_LENGTH,
        "with spaces inside",
        "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
        "".join(chr(c) for c in range(0x20, 0x7F)),
    ],
)
def test_printable_ascii_keys_up_to_255_chars_are_accepted(key: str) -> None:
    assert validate_key(key) == key


@pytest.mark.parametrize(
    "key",
    [
        "",
        "a" * (MAX_KEY_LENGTH + 1),
        "a" * 1000,
        "tab\there",
        "new\nline",
        "nul\x00",
        "del\x7f",
        "caf\u00e9",
        "\u00a0",
        "emoji\U0001f600",
    ],
)
def test_other_keys_are_a_400_problem(key: str) -> None:
    with pytest.raises(ProblemError) as caught:
        validate_key(key)
    problem = caught.value
    assert problem.status == 400
    assert problem.kind == "invalid-idempotency-key"
    assert HEADER in problem.detail
    assert str(MAX_KEY_LENGTH) in problem.detail


def test_max_key_length_is_255() -> None:
    assert MAX_KEY_LENGTH == 255


@given(st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=1, max_size=255))
def test_any_printable_ascii_key_is_accepted(key: str) -> None:
    assert validate_key(key) == key


@given(st.text(min_size=1, max_size=255))
def test_a_key_is_accepted_exactly_when_it_is_printable_ascii(key: str) -> None:
    printable_ascii = all(0x20 <= ord(c) <= 0x7E for c in key)
    try:
        validate_key(key)
    except ProblemError as exc:
        assert exc.status == 400
        assert not printable_ascii
    else:
        assert printable_ascii


# -- fingerprint ------------------------------------------------------------------------------


def test_key_order_and_whitespace_do_not_change_the_fingerprint() -> None:
    a = orjson.loads('{"type":"invoice.paid","data":{"id":"in_1","amount":4200,"tags":["x"]}}')
    b = orjson.loads(
        """
        {
          "data": { "tags": [ "x" ], "amount": 4200, "id": "in_1" },
          "type": "invoice.paid"
        }
        """
    )
    assert fingerprint(a) == fingerprint(b)


@pytest.mark.parametrize(
    "other",
    [
        {"type": "invoice.paid", "data": {"id": "in_1", "amount": 4201}},
        {"type": "invoice.paid", "data": {"id": "in_2", "amount": 4200}},
        {"type": "invoice.void", "data": {"id": "in_1", "amount": 4200}},
        {"type": "invoice.paid", "data": {"id": "in_1", "amount": "4200"}},
        {"type": "invoice.paid", "data": {"id": "in_1", "amount": 4200, "x": None}},
        {"type": "invoice.paid", "data": {"id": "in_1"}},
        {"type": "invoice.paid", "data": [{"id": "in_1", "amount": 4200}]},
    ],
)
def test_a_different_value_changes_the_fingerprint(other: object) -> None:
    base = {"type": "invoice.paid", "data": {"id": "in_1", "amount": 4200}}
    assert fingerprint(base) != fingerprint(other)


def test_list_order_is_significant() -> None:
    assert fingerprint({"a": [1, 2]}) != fingerprint({"a": [2, 1]})


def test_the_fingerprint_is_a_sha256_hex_digest() -> None:
    digest = fingerprint({"a": 1})
    assert len(digest) == 64
    assert all(c in "0123456789abcdef" for c in digest)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)


@given(
    st.dictionaries(st.text(max_size=6), json_values, max_size=6),
    st.randoms(use_true_random=False),
    st.sampled_from([None, 1, 2, 4]),
)
def test_any_reordered_reformatted_object_has_the_same_fingerprint(
    value: dict[str, object], rnd: random.Random, indent: int | None
) -> None:
    def shuffled(node: object) -> object:
        if isinstance(node, dict):
            items = list(node.items())
            rnd.shuffle(items)
            return {k: shuffled(v) for k, v in items}
        if isinstance(node, list):
            return [shuffled(v) for v in node]
        return node

    # Reserialise with other key order and white space, then parse again like the API does.
    text = json.dumps(shuffled(value), indent=indent)
    assert fingerprint(orjson.loads(text)) == fingerprint(value)


# -- outcome_problem --------------------------------------------------------------------------


def test_a_reused_key_with_another_body_is_422() -> None:
    problem = outcome_problem(IngestOutcome.MISMATCH)
    assert problem is not None
    assert problem.status == 422
    assert problem.kind == "idempotency-key-reused"
    assert "Retry-After" not in problem.headers


def test_a_key_still_in_flight_is_409_with_retry_after() -> None:
    problem = outcome_problem(IngestOutcome.IN_FLIGHT)
    assert problem is not None
    assert problem.status == 409
    assert problem.kind == "idempotency-in-flight"
    assert problem.headers == {"Retry-After": "1"}
    response = problem.response("/v1/events")
    assert response.status == 409
    assert response.headers["Retry-After"] == "1"
    assert response.content_type == CONTENT_TYPE


@pytest.mark.parametrize(
    "outcome", [IngestOutcome.CREATED, IngestOutcome.REPLAY, IngestOutcome.BACKLOG_FULL]
)
def test_other_outcomes_are_no_problem(outcome: IngestOutcome) -> None:
    assert outcome_problem(outcome) is None
