"""Key parsing, generation and keeping secrets out of messages and reprs."""

from __future__ import annotations

import base64
import hmac
import traceback

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st

from signer import (
    InvalidKeyError,
    Signer,
    SigningKey,
    Verifier,
    generate_keypair,
    generate_secret,
)
from signer.keys import HmacKey

# 32 bytes, so its base64 form ends in one "=" and padding handling is exercised.
RAW = bytes(range(100, 132))
PADDED = base64.b64encode(RAW).decode()
UNPADDED = PADDED.rstrip("=")
SECRET = "whsec_" + PADDED
CONTENT = b"msg_1.1700000000.{}"


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def test_padding_is_optional_and_extra_padding_tolerated() -> None:
    assert PADDED.endswith("=") and not UNPADDED.endswith("=")
    expected = SigningKey.parse(SECRET).sign(CONTENT)
    for text in ("whsec_" + UNPADDED, "whsec_" + PADDED + "==", f"  {SECRET}\n"):
        assert SigningKey.parse(text).sign(CONTENT) == expected
    headers = Signer([SECRET]).headers("msg_1", 1700000000, b"{}")
    for key in (SECRET, "whsec_" + UNPADDED, PADDED, UNPADDED):
        assert Verifier([key]).verify(b"{}", headers, now=1700000000) == b"{}"


def test_sign_matches_stdlib_hmac() -> None:
    mac = hmac.digest(RAW, CONTENT, "sha256")
    assert SigningKey.parse(SECRET).sign(CONTENT) == "v1," + _b64(mac)


@given(key=st.binary(max_size=200), prefix=st.binary(max_size=100), body=st.binary())
def test_prepared_hmac_equals_stdlib_for_any_key_length(
    key: bytes, prefix: bytes, body: bytes
) -> None:
    assert HmacKey(key).digest(prefix, body) == hmac.digest(key, prefix + body, "sha256")


def test_ed25519_key_signs_verifiably_and_exposes_public_key() -> None:
    private, public = generate_keypair()
    key = SigningKey.parse(private)
    assert key.kind == "ed25519"
    assert key.public_key() == public
    signature = key.sign(CONTENT)
    assert signature.startswith("v1a,")
    raw_private = base64.b64decode(private.removeprefix("whsk_"))
    Ed25519PrivateKey.from_private_bytes(raw_private).public_key().verify(
        base64.b64decode(signature[4:]), CONTENT
    )


def test_hmac_key_has_no_public_key() -> None:
    key = SigningKey.parse(SECRET)
    assert key.kind == "hmac"
    assert key.public_key() is None


def test_generate_secret_lengths() -> None:
    assert len(base64.b64decode(generate_secret().removeprefix("whsec_"))) == 32
    for nbytes in (24, 64):
        assert len(base64.b64decode(generate_secret(nbytes)[6:])) == nbytes
        SigningKey.parse(generate_secret(nbytes))
    for nbytes in (23, 65, 0):
        with pytest.raises(ValueError, match=r"24\.\.64"):
            generate_secret(nbytes)
    assert generate_secret() != generate_secret()


def test_generate_keypair_formats() -> None:
    private, public = generate_keypair()
    assert private.startswith("whsk_") and public.startswith("whpk_")
    assert len(base64.b64decode(private[5:])) == len(base64.b64decode(public[5:])) == 32


# Distinctive key material, so a leak into a message is easy to spot.
LEAKY = "Zm9vYmFyYmF6cXV4"  # 12 bytes: too short as a secret
BAD_SIGNING_KEYS = [
    pytest.param("whsec_" + LEAKY, "24..64 bytes", id="hmac-too-short"),
    pytest.param("whsec_" + _b64(b"q" * 65), "24..64 bytes, got 65", id="hmac-too-long"),
    pytest.param("whsec_" + LEAKY + "!" + LEAKY, "not valid base64", id="hmac-bad-char"),
    pytest.param("whsec_" + LEAKY.replace("m", "-"), "not valid base64", id="hmac-urlsafe"),
    pytest.param("whsec_" + LEAKY + "A", "not valid base64", id="hmac-bad-length"),
    pytest.param("whsec_", "got 0", id="hmac-empty"),
    pytest.param("whsk_" + _b64(b"k" * 31), "32 bytes, got 31", id="ed25519-short"),
    pytest.param("whsk_" + _b64(b"k" * 33), "32 bytes, got 33", id="ed25519-long"),
    pytest.param("whpk_" + _b64(b"k" * 32), "cannot sign", id="public-key"),
    pytest.param("wh_" + LEAKY, "whsec_ or whsk_", id="prefix"),
    pytest.param(LEAKY * 3, "whsec_ or whsk_", id="no-prefix"),
]


def _assert_no_leak(exc: BaseException, key: str) -> None:
    # A chained base64 error would be printed with the traceback.
    assert exc.__cause__ is None
    assert exc.__context__ is None or exc.__suppress_context__
    secret_part = key.split("_", 1)[-1]
    if secret_part:
        assert secret_part not in "".join(traceback.format_exception(exc))
        assert secret_part not in repr(exc)


@pytest.mark.parametrize(("key", "message"), BAD_SIGNING_KEYS)
def test_bad_signing_keys_are_rejected_without_leaking(key: str, message: str) -> None:
    with pytest.raises(InvalidKeyError, match=message.replace(".", r"\.")) as caught:
        SigningKey.parse(key)
    _assert_no_leak(caught.value, key)
    with pytest.raises(InvalidKeyError, match="signing key #1") as caught:
        Signer([SECRET, key])
    _assert_no_leak(caught.value, key)


@pytest.mark.parametrize(
    ("key", "message"),
    [
        pytest.param("whsec_" + LEAKY, "24..64 bytes", id="hmac-too-short"),
        pytest.param(LEAKY, "24..64 bytes", id="raw-too-short"),
        pytest.param(LEAKY + "!" + LEAKY, "not valid base64", id="raw-bad-char"),
        pytest.param("whpk_" + _b64(b"k" * 31), "32 bytes, got 31", id="public-short"),
        pytest.param("whsk_" + _b64(b"k" * 32), "belongs to the sender", id="private-key"),
        pytest.param("xx_" + LEAKY, "raw base64", id="prefix"),
    ],
)
def test_bad_verification_keys_are_rejected_without_leaking(key: str, message: str) -> None:
    with pytest.raises(InvalidKeyError, match=message.replace(".", r"\.")) as caught:
        Verifier([SECRET, key])
    assert "verification key #1" in str(caught.value)
    _assert_no_leak(caught.value, key)


def test_empty_key_lists_are_rejected() -> None:
    with pytest.raises(InvalidKeyError, match="at least one"):
        Signer([])
    with pytest.raises(InvalidKeyError, match="at least one"):
        Verifier([])


def test_invalid_key_error_is_a_value_error() -> None:
    assert issubclass(InvalidKeyError, ValueError)


def test_reprs_never_show_key_material() -> None:
    private, public = generate_keypair()
    hmac_key, ed_key = SigningKey.parse(SECRET), SigningKey.parse(private)
    assert repr(hmac_key) == str(hmac_key) == "SigningKey(kind='hmac')"
    assert repr(ed_key) == "SigningKey(kind='ed25519')"
    rendered = " ".join(
        [
            repr(Signer([SECRET, private])),
            str(Signer([hmac_key])),
            repr(Verifier([SECRET, public])),
            repr(HmacKey(RAW)),
        ]
    )
    for material in (PADDED, UNPADDED, private[5:], public[5:]):
        assert material not in rendered
