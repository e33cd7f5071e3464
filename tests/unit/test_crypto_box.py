"""SecretBox with a single master key: sealing, opening and refusing. See also the keyring tests."""

from __future__ import annotations

import base64

import pytest

from webhook_service.crypto import MasterKeyError, SecretBox, generate_master_key

EP = "ep_01JDZ0000000000000000000000"


@pytest.fixture
def master_key() -> str:
    return generate_master_key()


@pytest.fixture
def box(master_key: str) -> SecretBox:
    return SecretBox(master_key)


@pytest.mark.parametrize("plain", ["whsec_abc", "", "ünïcode ✓", "x" * 10_000])
def test_seal_then_open_round_trips(box: SecretBox, plain: str) -> None:
    assert box.open(box.seal(plain, EP), EP) == plain


def test_the_sealed_token_hides_the_secret_and_is_fresh_each_time(box: SecretBox) -> None:
    a, b = box.seal("whsec_super_secret", EP), box.seal("whsec_super_secret", EP)
    assert a != b  # random nonce
    assert "super_secret" not in a
    assert box.open(a, EP) == box.open(b, EP) == "whsec_super_secret"


def test_another_box_with_the_same_key_opens_it(box: SecretBox, master_key: str) -> None:
    assert SecretBox(master_key).open(box.seal("s", EP), EP) == "s"


@pytest.mark.parametrize("other", ["ep_other", "", EP + " ", EP.lower()])
def test_wrong_associated_data_is_a_master_key_error(box: SecretBox, other: str) -> None:
    with pytest.raises(MasterKeyError):
        box.open(box.seal("s", EP), other)


def test_a_different_master_key_is_a_master_key_error(box: SecretBox) -> None:
    with pytest.raises(MasterKeyError):
        SecretBox(generate_master_key()).open(box.seal("s", EP), EP)


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "not base64!",
        "c2hvcnQ=",  # "short": valid base64, 5 bytes
        base64.b64encode(b"k" * 16).decode(),
        base64.b64encode(b"k" * 31).decode(),
        base64.b64encode(b"k" * 33).decode(),
        base64.b64encode(b"k" * 64).decode(),
        base64.urlsafe_b64encode(b"\xfb" * 32).decode(),  # URL-safe alphabet is not accepted
    ],
)
def test_a_bad_master_key_is_a_master_key_error(bad: str) -> None:
    with pytest.raises(MasterKeyError) as caught:
        SecretBox(bad)
    assert bad not in str(caught.value) or bad == ""


def test_master_key_error_is_a_value_error() -> None:
    assert issubclass(MasterKeyError, ValueError)


def test_generated_master_keys_are_32_random_bytes() -> None:
    keys = {generate_master_key() for _ in range(50)}
    assert len(keys) == 50
    assert all(len(base64.b64decode(k, validate=True)) == 32 for k in keys)


def test_repr_shows_no_key(box: SecretBox, master_key: str) -> None:
    text = repr(box) + str(box)
    raw = base64.b64decode(master_key)
    assert master_key not in text
    assert raw.hex() not in text
    assert repr(raw) not in text
    assert "SecretBox" in repr(box)


@pytest.mark.parametrize("token", ["", "v9:abc", "plain text", "V1:abc"])
def test_unknown_token_formats_are_master_key_errors(box: SecretBox, token: str) -> None:
    with pytest.raises(MasterKeyError):
        box.open(token, EP)
