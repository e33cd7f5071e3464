"""Request schemas: event types, event data, endpoint creation and patches."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from webhook_service.api.models import EndpointIn, EndpointPatch, EventIn

GOOD_TYPES = [
    "invoice.paid",
    "a_b.c1",
    "a",
    "A.B.C.D",
    "user_created",
    "v2.invoice.payment_failed",
    "_",
    "0.1",
    "x" * 128,
    ("a." * 64)[:127] + "b",
]
BAD_TYPES = [
    "invoice..paid",
    ".x",
    "x.",
    ".",
    "in voice",
    "",
    "x" * 129,
    "invoice.paid\n",
    "\ninvoice.paid",
    "invoice-paid",
    "invoice/paid",
    "invoice.*",
    "ïnvoice.paid",
    " invoice.paid",
]


def errors_of(model: type[Any], data: dict[str, Any]) -> list[ErrorDetails]:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(data)
    return caught.value.errors(include_url=False)


def locs(model: type[Any], data: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [tuple(e["loc"]) for e in errors_of(model, data)]


# -- EventIn ----------------------------------------------------------------------------------


@pytest.mark.parametrize("event_type", GOOD_TYPES)
def test_good_event_types_are_accepted(event_type: str) -> None:
    assert EventIn(type=event_type, data={}).type == event_type


@pytest.mark.parametrize("event_type", BAD_TYPES)
def test_bad_event_types_are_rejected(event_type: str) -> None:
    assert locs(EventIn, {"type": event_type, "data": {}}) == [("type",)]


def test_the_type_length_limit_is_128() -> None:
    assert EventIn(type="a" * 128, data={}).type == "a" * 128
    assert locs(EventIn, {"type": "a" * 129, "data": {}}) == [("type",)]


@given(st.lists(st.from_regex(r"\A[A-Za-z0-9_]{1,10}\Z"), min_size=1, max_size=10).map(".".join))
def test_any_dotted_word_sequence_is_a_type(event_type: str) -> None:
    if len(event_type) <= 128:
        assert EventIn(type=event_type, data={}).type == event_type


@pytest.mark.parametrize(
    "data",
    [{}, {"id": "in_1"}, {"nested": {"list": [1, 2, {"x": None}]}, "n": 1.5, "ok": True}],
)
def test_data_may_be_any_object(data: dict[str, Any]) -> None:
    assert EventIn(type="invoice.paid", data=data).data == data


@pytest.mark.parametrize("data", [[], [{"id": 1}], "text", 1, 1.5, True, None])
def test_data_must_be_an_object(data: Any) -> None:
    assert locs(EventIn, {"type": "invoice.paid", "data": data}) == [("data",)]


def test_type_and_data_are_required() -> None:
    assert sorted(locs(EventIn, {})) == [("data",), ("type",)]


@pytest.mark.parametrize("extra", ["id", "timestamp", "Type", "endpoint"])
def test_extra_event_fields_are_forbidden(extra: str) -> None:
    errors = errors_of(EventIn, {"type": "invoice.paid", "data": {}, extra: "x"})
    assert [(tuple(e["loc"]), e["type"]) for e in errors] == [((extra,), "extra_forbidden")]


def test_a_type_must_be_a_string() -> None:
    assert locs(EventIn, {"type": 1, "data": {}}) == [("type",)]


# -- EndpointIn -------------------------------------------------------------------------------


def test_endpoint_defaults() -> None:
    endpoint = EndpointIn(url="https://receiver.example.com/hook")
    assert endpoint.event_types is None  # None: every type
    assert endpoint.description == ""
    assert endpoint.disabled is False


def test_event_types_are_deduplicated_and_sorted() -> None:
    endpoint = EndpointIn(
        url="https://r.example.com/", event_types=["z.last", "a.first", "z.last", "m", "a.first"]
    )
    assert endpoint.event_types == ["a.first", "m", "z.last"]


@given(st.lists(st.sampled_from(GOOD_TYPES), min_size=1, max_size=20))
def test_any_event_type_list_comes_out_sorted_and_unique(types: list[str]) -> None:
    endpoint = EndpointIn(url="https://r.example.com/", event_types=types)
    assert endpoint.event_types == sorted(set(types))


def test_explicit_null_event_types_means_every_type() -> None:
    endpoint = EndpointIn.model_validate({"url": "https://r.example.com/", "event_types": None})
    assert endpoint.event_types is None


@pytest.mark.parametrize("index", [0, 1, 2])
def test_a_bad_event_type_in_the_list_is_located_by_index(index: int) -> None:
    types = ["invoice.paid", "user.created", "ok"]
    types[index] = "bad..type"
    assert locs(EndpointIn, {"url": "https://r.example.com/", "event_types": types}) == [
        ("event_types", index)
    ]


def test_at_most_256_event_types() -> None:
    many = [f"t{n}" for n in range(256)]
    assert len(EndpointIn(url="https://r.example.com/", event_types=many).event_types or []) == 256
    too_many = {"url": "https://r.example.com/", "event_types": [*many, "t256"]}
    assert locs(EndpointIn, too_many) == [("event_types",)]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("url", ""),
        ("url", "https://r.example.com/" + "a" * 2048),
        ("description", "d" * 1025),
        ("disabled", "maybe"),
        ("event_types", "invoice.paid"),
        ("event_types", {"invoice.paid": True}),
    ],
)
def test_endpoint_fields_are_checked(field: str, value: Any) -> None:
    data: dict[str, Any] = {"url": "https://r.example.com/", field: value}
    assert {loc[0] for loc in locs(EndpointIn, data)} == {field}


@pytest.mark.parametrize(
    "char", ["\x1b", "\r", "\n", "\t", "\x00", "\x07", "\x7f", "\x9b", "\u202e"]
)
@pytest.mark.parametrize("model", [EndpointIn, EndpointPatch])
@pytest.mark.parametrize("field", ["url", "description"])
def test_control_characters_are_refused_in_url_and_description(
    char: str, model: type[Any], field: str
) -> None:
    data: dict[str, Any] = {"url": "https://r.example.com/", field: f"x{char}y"}
    [error] = errors_of(model, data)
    assert error["loc"] == (field,)
    assert f"U+{ord(char):04X}" in error["msg"]


def test_printable_unicode_is_fine_in_url_and_description() -> None:
    endpoint = EndpointIn(url="https://r.example.com/façade", description="Équipe 漢字 👍")
    assert endpoint.description == "Équipe 漢字 👍"


def test_description_up_to_1024_and_url_up_to_2048_are_fine() -> None:
    url = "https://r.example.com/" + "a" * (2048 - len("https://r.example.com/"))
    endpoint = EndpointIn(url=url, description="d" * 1024)
    assert len(endpoint.url) == 2048


def test_url_is_required() -> None:
    assert locs(EndpointIn, {}) == [("url",)]


@pytest.mark.parametrize("extra", ["secret", "id", "eventTypes"])
def test_extra_endpoint_fields_are_forbidden(extra: str) -> None:
    errors = errors_of(EndpointIn, {"url": "https://r.example.com/", extra: "x"})
    assert [(tuple(e["loc"]), e["type"]) for e in errors] == [((extra,), "extra_forbidden")]


# -- EndpointPatch ----------------------------------------------------------------------------


def test_an_empty_patch_sets_nothing() -> None:
    patch = EndpointPatch.model_validate({})
    assert patch.model_fields_set == set()
    assert (patch.url, patch.event_types, patch.description, patch.disabled) == (
        None,
        None,
        None,
        None,
    )


def test_a_patch_to_null_event_types_is_told_apart_from_no_change() -> None:
    patch = EndpointPatch.model_validate({"event_types": None})
    assert patch.event_types is None
    assert patch.model_fields_set == {"event_types"}


def test_patch_event_types_are_deduplicated_and_sorted() -> None:
    patch = EndpointPatch.model_validate({"event_types": ["b", "a", "b"]})
    assert patch.event_types == ["a", "b"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("url", ""),
        ("event_types", ["x."]),
        ("description", "d" * 1025),
        ("disabled", "maybe"),
        ("secret", "whsec_x"),
    ],
)
def test_patch_fields_are_checked(field: str, value: Any) -> None:
    assert {loc[0] for loc in locs(EndpointPatch, {field: value})} == {field}
