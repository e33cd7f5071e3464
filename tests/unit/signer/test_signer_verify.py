"""Verification rules: the published test vector and each rejection reason."""

from __future__ import annotations

import pickle

import pytest
from multidict import CIMultiDict

from signer import (
    InvalidTimestampError,
    MissingHeaderError,
    NoMatchingSignatureError,
    Signer,
    TimestampTooNewError,
    TimestampTooOldError,
    Verifier,
    WebhookVerificationError,
    generate_keypair,
    generate_secret,
    sign_headers,
)

# Test vector from the Standard Webhooks specification.
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
MSG_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
TIMESTAMP = 1614265330
BODY = b'{"test": 2432232314}'
SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
HEADERS = {
    "webhook-id": MSG_ID,
    "webhook-timestamp": str(TIMESTAMP),
    "webhook-signature": SIGNATURE,
}


def verify(headers: dict[str, str], body: bytes = BODY, keys: tuple[str, ...] = (SECRET,)) -> bytes:
    return Verifier(list(keys)).verify(body, headers, now=TIMESTAMP)


def test_signer_reproduces_the_test_vector() -> None:
    assert Signer([SECRET]).headers(MSG_ID, TIMESTAMP, BODY) == HEADERS
    assert Signer([SECRET]).signature(MSG_ID, TIMESTAMP, BODY) == SIGNATURE
    assert sign_headers([SECRET], MSG_ID, TIMESTAMP, BODY) == HEADERS


def test_verifier_accepts_the_test_vector_and_returns_the_body() -> None:
    assert verify(HEADERS) == BODY


@pytest.mark.parametrize(
    ("body", "headers", "keys"),
    [
        pytest.param(b'{"test": 2432232315}', HEADERS, (SECRET,), id="body"),
        pytest.param(b'{"test":2432232314}', HEADERS, (SECRET,), id="body-reserialised"),
        pytest.param(BODY, HEADERS, (generate_secret(24),), id="secret"),
        pytest.param(BODY, {**HEADERS, "webhook-id": MSG_ID + "x"}, (SECRET,), id="id"),
        pytest.param(
            BODY, {**HEADERS, "webhook-timestamp": str(TIMESTAMP + 1)}, (SECRET,), id="timestamp"
        ),
    ],
)
def test_negative_twins_fail(body: bytes, headers: dict[str, str], keys: tuple[str, ...]) -> None:
    with pytest.raises(NoMatchingSignatureError):
        Verifier(list(keys), tolerance=10).verify(body, headers, now=TIMESTAMP)


def test_rotation_header_verifies_with_each_key_alone() -> None:
    old, new = SECRET, generate_secret()
    private, public = generate_keypair()
    headers = Signer([old, new, private]).headers(MSG_ID, TIMESTAMP, BODY)
    signatures = headers["webhook-signature"].split(" ")
    assert [s.split(",")[0] for s in signatures] == ["v1", "v1", "v1a"]
    assert signatures[0] == SIGNATURE
    for key in (old, new, public):
        assert verify(headers, keys=(key,)) == BODY


def test_verifier_with_several_keys_accepts_a_message_signed_by_any() -> None:
    other = generate_secret()
    headers = Signer([other]).headers(MSG_ID, TIMESTAMP, BODY)
    assert verify(headers, keys=(SECRET, other)) == BODY


@pytest.mark.parametrize(
    "header",
    [
        f"v2,xxx {SIGNATURE}",
        f"v1a,notbase64!! {SIGNATURE}",
        f"v1,%%% {SIGNATURE}",
        f"garbage {SIGNATURE}",
        f"v1,AAAA  {SIGNATURE}",
        f"{SIGNATURE} v2,xxx",
    ],
)
def test_unknown_versions_and_malformed_entries_are_skipped(header: str) -> None:
    assert verify({**HEADERS, "webhook-signature": header}) == BODY


def test_only_unknown_versions_is_no_match() -> None:
    with pytest.raises(NoMatchingSignatureError, match="1 of unknown version"):
        verify({**HEADERS, "webhook-signature": "v2," + SIGNATURE[3:]})


def test_hmac_signature_is_not_accepted_as_v1a() -> None:
    with pytest.raises(NoMatchingSignatureError):
        verify({**HEADERS, "webhook-signature": "v1a," + SIGNATURE[3:]})


def test_v1a_is_ignored_when_only_hmac_keys_are_configured() -> None:
    private, _ = generate_keypair()
    headers = Signer([private]).headers(MSG_ID, TIMESTAMP, BODY)
    with pytest.raises(NoMatchingSignatureError, match="0 public key"):
        verify(headers)


@pytest.mark.parametrize(
    ("now", "error"),
    [
        (TIMESTAMP + 300, None),
        (TIMESTAMP - 300, None),
        (TIMESTAMP + 301, TimestampTooOldError),
        (TIMESTAMP - 301, TimestampTooNewError),
    ],
)
def test_tolerance_edges(now: int, error: type[Exception] | None) -> None:
    verifier = Verifier([SECRET])
    if error is None:
        assert verifier.verify(BODY, HEADERS, now=now) == BODY
    else:
        with pytest.raises(error, match="tolerance 300 s"):
            verifier.verify(BODY, HEADERS, now=now)


def test_tolerance_is_configurable() -> None:
    verifier = Verifier([SECRET], tolerance=10)
    assert verifier.verify(BODY, HEADERS, now=TIMESTAMP + 10) == BODY
    with pytest.raises(TimestampTooOldError):
        verifier.verify(BODY, HEADERS, now=TIMESTAMP + 11)
    with pytest.raises(ValueError, match="tolerance"):
        Verifier([SECRET], tolerance=-1)


def test_default_now_is_the_clock() -> None:
    with pytest.raises(TimestampTooOldError):
        Verifier([SECRET]).verify(BODY, HEADERS)


@pytest.mark.parametrize("name", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_missing_or_empty_header(name: str) -> None:
    missing = {k: v for k, v in HEADERS.items() if k != name}
    with pytest.raises(MissingHeaderError, match=name):
        verify(missing)
    with pytest.raises(MissingHeaderError, match=name):
        verify({**HEADERS, name: ""})


@pytest.mark.parametrize(
    "stamp",
    [
        "1614265330.0",
        "-1614265330",
        " 1614265330",
        "1_614_265_330",
        # Full-width digits pass str.isdigit() and int(), but are not ASCII seconds.
        "\uff11\uff12\uff13",
        "9" * 5000,
    ],
)
def test_timestamp_must_be_plain_integer_seconds(stamp: str) -> None:
    with pytest.raises(InvalidTimestampError, match="integer Unix seconds"):
        verify({**HEADERS, "webhook-timestamp": stamp})


def test_headers_are_case_insensitive() -> None:
    mixed = {
        "Webhook-Id": MSG_ID,
        "WEBHOOK-TIMESTAMP": str(TIMESTAMP),
        "webhook-Signature": SIGNATURE,
    }
    assert verify(mixed) == BODY
    assert Verifier([SECRET]).verify(BODY, CIMultiDict(mixed), now=TIMESTAMP) == BODY


def test_all_failures_share_one_base_class_and_pickle() -> None:
    with pytest.raises(WebhookVerificationError) as caught:
        verify({**HEADERS, "webhook-signature": "v1,AAAA"})
    # Round-tripping our own exception object, as Celery's result backend would.
    copy = pickle.loads(pickle.dumps(caught.value))  # noqa: S301
    assert type(copy) is NoMatchingSignatureError
    assert str(copy) == str(caught.value)


def test_float_timestamps_are_refused_when_signing() -> None:
    with pytest.raises(TypeError):
        Signer([SECRET]).headers(MSG_ID, 1614265330.5, BODY)  # type: ignore[arg-type]  # deliberately wrong: the refusal is the test


def test_a_single_string_is_not_a_key_list() -> None:
    with pytest.raises(TypeError):
        Signer(SECRET)
    with pytest.raises(TypeError):
        Verifier(SECRET)
