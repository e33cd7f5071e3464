"""Property tests: sign/verify round-trips over random bodies, ids and key sets."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st

from signer import NoMatchingSignatureError, Signer, SigningKey, Verifier


def _hmac_secret(raw: bytes, padded: bool) -> str:
    encoded = base64.b64encode(raw).decode()
    return "whsec_" + (encoded if padded else encoded.rstrip("="))


def _ed25519_private(seed: bytes) -> str:
    raw = Ed25519PrivateKey.from_private_bytes(seed).private_bytes_raw()
    return "whsk_" + base64.b64encode(raw).decode()


hmac_secrets = st.builds(_hmac_secret, st.binary(min_size=24, max_size=64), st.booleans())
ed25519_keys = st.builds(_ed25519_private, st.binary(min_size=32, max_size=32))
key_sets = st.lists(st.one_of(hmac_secrets, ed25519_keys), min_size=1, max_size=4)
# Surrogates cannot be UTF-8 encoded, so they cannot travel in a header either.
msg_ids = st.text(st.characters(codec="utf-8"), min_size=1, max_size=40).filter(str.strip)
timestamps = st.integers(min_value=0, max_value=10**12)


def _verification_key(signing_key: str) -> str:
    return SigningKey.parse(signing_key).public_key() or signing_key


@given(keys=key_sets, msg_id=msg_ids, timestamp=timestamps, body=st.binary(max_size=4096))
def test_each_key_alone_verifies_the_signed_message(
    keys: list[str], msg_id: str, timestamp: int, body: bytes
) -> None:
    headers = Signer(keys).headers(msg_id, timestamp, body)
    assert len(headers["webhook-signature"].split(" ")) == len(keys)
    for key in keys:
        verifier = Verifier([_verification_key(key)])
        assert verifier.verify(body, headers, now=timestamp) is body


@given(
    keys=key_sets,
    msg_id=msg_ids,
    timestamp=timestamps,
    body=st.binary(min_size=1, max_size=4096),
    data=st.data(),
)
def test_a_flipped_body_byte_fails_for_every_key(
    keys: list[str], msg_id: str, timestamp: int, body: bytes, data: st.DataObject
) -> None:
    headers = Signer(keys).headers(msg_id, timestamp, body)
    index = data.draw(st.integers(min_value=0, max_value=len(body) - 1))
    bit = data.draw(st.integers(min_value=0, max_value=7))
    tampered = bytearray(body)
    tampered[index] ^= 1 << bit
    verifier = Verifier([_verification_key(key) for key in keys])
    with pytest.raises(NoMatchingSignatureError):
        verifier.verify(bytes(tampered), headers, now=timestamp)


@given(keys=key_sets, msg_id=msg_ids, timestamp=timestamps, body=st.binary(max_size=256))
def test_signatures_are_bound_to_id_and_timestamp(
    keys: list[str], msg_id: str, timestamp: int, body: bytes
) -> None:
    headers = Signer(keys).headers(msg_id, timestamp, body)
    verifier = Verifier([_verification_key(key) for key in keys], tolerance=1)
    with pytest.raises(NoMatchingSignatureError):
        verifier.verify(body, {**headers, "webhook-id": msg_id + "x"}, now=timestamp)
    with pytest.raises(NoMatchingSignatureError):
        verifier.verify(body, {**headers, "webhook-timestamp": str(timestamp + 1)}, now=timestamp)
