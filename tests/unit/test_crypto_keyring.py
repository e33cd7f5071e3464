"""The master-key keyring of SecretBox: key ids in tokens, old keys that still open."""

from __future__ import annotations

import base64
import hashlib
import os

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from webhook_service.crypto import MasterKeyError, SecretBox, generate_master_key, looks_sealed

AD = "ep_01"


def kid_of(key: str) -> str:
    return hashlib.sha256(base64.b64decode(key)).hexdigest()[:8]


def v1_token(key: str, plaintext: str, associated: str) -> str:
    """A token in the old format, built independently of SecretBox."""
    nonce = os.urandom(12)
    sealed = AESGCM(base64.b64decode(key)).encrypt(nonce, plaintext.encode(), associated.encode())
    return "v1:" + base64.b64encode(nonce + sealed).decode()


def test_token_names_the_sealing_key() -> None:
    key = generate_master_key()
    token = SecretBox(key).seal("whsec_abc", AD)
    prefix, kid, body = token.split(":")
    assert prefix == "v2"
    assert kid == kid_of(key)
    assert len(base64.b64decode(body)) == 12 + len("whsec_abc") + 16


def test_seals_with_the_current_key_only() -> None:
    old, new = generate_master_key(), generate_master_key()
    token = SecretBox(new, [old]).seal("s", AD)
    assert token.startswith(f"v2:{kid_of(new)}:")
    assert SecretBox(new).open(token, AD) == "s"
    with pytest.raises(MasterKeyError):
        SecretBox(old).open(token, AD)


def test_keyring_opens_tokens_of_a_previous_key() -> None:
    old, new = generate_master_key(), generate_master_key()
    token = SecretBox(old).seal("whsec_old", AD)
    ring = SecretBox(new, [old])
    assert ring.open(token, AD) == "whsec_old"
    assert not ring.sealed_with_current(token)
    assert ring.sealed_with_current(ring.seal("x", AD))


def test_single_key_box_still_works() -> None:
    box = SecretBox(generate_master_key())
    assert box.open(box.seal("secret", AD), AD) == "secret"
    with pytest.raises(MasterKeyError):
        box.open(box.seal("secret", AD), "ep_other")


@pytest.mark.parametrize("position", [0, 1, 2])
def test_v1_tokens_open_with_any_key_of_the_ring(position: int) -> None:
    ring_keys = [generate_master_key() for _ in range(3)]
    token = v1_token(ring_keys[position], "legacy", AD)
    box = SecretBox(ring_keys[0], ring_keys[1:])
    assert box.open(token, AD) == "legacy"
    assert not box.sealed_with_current(token)  # a v1 token is never current: rekey upgrades it


def test_v1_token_of_a_foreign_key_fails() -> None:
    token = v1_token(generate_master_key(), "legacy", AD)
    with pytest.raises(MasterKeyError):
        SecretBox(generate_master_key(), [generate_master_key()]).open(token, AD)


def test_unknown_kid_is_a_master_key_error() -> None:
    token = SecretBox(generate_master_key()).seal("s", AD)
    box = SecretBox(generate_master_key(), [generate_master_key()])
    with pytest.raises(MasterKeyError, match="does not hold"):
        box.open(token, AD)


def test_a_token_relabelled_with_another_kid_fails() -> None:
    old, new = generate_master_key(), generate_master_key()
    token = SecretBox(old).seal("s", AD)
    forged = token.replace(kid_of(old), kid_of(new), 1)
    with pytest.raises(MasterKeyError):
        SecretBox(new, [old]).open(forged, AD)


@pytest.mark.parametrize("index", [0, 20, -1], ids=["nonce", "ciphertext", "tag"])
def test_tampered_token_fails(index: int) -> None:
    box = SecretBox(generate_master_key())
    token = box.seal("whsec_abcdefgh", AD)
    head = len("v2:") + 8 + len(":")
    body = bytearray(base64.b64decode(token[head:]))
    body[index] ^= 0x01
    tampered = token[:head] + base64.b64encode(bytes(body)).decode()
    with pytest.raises(MasterKeyError):
        box.open(tampered, AD)


@pytest.mark.parametrize(
    "token",
    ["", "v3:abc", "v2:", "v2:deadbeef", "v2:deadbeef:%%%", "v1:%%%", "v1:", "v1:AAAA", "plain"],
)
def test_malformed_tokens_are_master_key_errors(token: str) -> None:
    with pytest.raises(MasterKeyError):
        SecretBox(generate_master_key()).open(token, AD)


def test_tokens_of_any_key_look_sealed_and_clear_values_do_not() -> None:
    # What migrate tells apart: a value sealed under a key not held is not sealed again.
    other = generate_master_key()
    assert looks_sealed(SecretBox(other).seal("Bearer x", AD))
    assert looks_sealed(v1_token(other, "Bearer x", AD))
    for clear in ("", "Bearer v2:deadbeef:AAAA", "v2:DEADBEEF:" + "A" * 40, "v1:AAAA", "v2:x:y"):
        assert not looks_sealed(clear), clear


def test_bad_previous_key_is_rejected_without_echoing_it() -> None:
    with pytest.raises(MasterKeyError) as excinfo:
        SecretBox(generate_master_key(), ["not-a-key!!"])
    assert "not-a-key" not in str(excinfo.value)
    short = base64.b64encode(b"k" * 16).decode()
    with pytest.raises(MasterKeyError) as excinfo:
        SecretBox(generate_master_key(), [short])
    assert short not in str(excinfo.value)


def test_a_lone_string_as_previous_is_refused() -> None:
    with pytest.raises(TypeError):
        SecretBox(generate_master_key(), generate_master_key())


def test_current_key_repeated_in_previous_is_harmless() -> None:
    key = generate_master_key()
    box = SecretBox(key, [key])
    assert box.open(box.seal("s", AD), AD) == "s"


def test_repr_and_errors_hold_no_key_material() -> None:
    old, new = generate_master_key(), generate_master_key()
    box = SecretBox(new, [old])
    text = repr(box) + str(box)
    for key in (old, new):
        raw = base64.b64decode(key)
        assert key not in text
        assert raw.hex() not in text
    with pytest.raises(MasterKeyError) as excinfo:
        SecretBox(generate_master_key()).open(box.seal("s", AD), AD)
    assert new not in str(excinfo.value)
    assert base64.b64decode(new).hex() not in str(excinfo.value)
