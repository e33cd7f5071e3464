"""API key format and hashing: what is parsed before any lookup, what is stored."""

from __future__ import annotations

import secrets
from collections.abc import Callable

import pytest

from webhook_service.ids import new_id
from webhook_service.store.apikeys import KEY_PREFIX, digest, parse_key


def a_key() -> tuple[str, str]:
    key_id = new_id("key")
    return key_id, f"{KEY_PREFIX}{key_id}_{secrets.token_hex(24)}"


def test_the_id_is_read_from_a_well_formed_key() -> None:
    key_id, key = a_key()
    assert parse_key(key) == key_id


@pytest.mark.parametrize(
    "mangle",
    [
        lambda k: k[4:],  # no whk_ prefix
        lambda k: k[:-1],  # secret one character short
        lambda k: k + "0",  # one long
        lambda k: k[:-1] + "G",  # not hex
        lambda k: k.upper(),
        lambda k: k.replace("key_", "ep_"),  # not a key id
        lambda k: k.rpartition("_")[0],  # no secret at all
        lambda k: "Bearer " + k,
        lambda k: "",
    ],
)
def test_anything_else_is_not_looked_up(mangle: Callable[[str], str]) -> None:
    _, key = a_key()
    assert parse_key(mangle(key)) is None


def test_the_digest_is_an_hmac_under_the_pepper() -> None:
    _, key = a_key()
    pepper = secrets.token_bytes(32)
    assert digest(pepper, key) == digest(pepper, key)
    assert len(digest(pepper, key)) == 64
    assert digest(pepper, key) != digest(secrets.token_bytes(32), key)
    _, other = a_key()
    assert digest(pepper, key) != digest(pepper, other)
    assert key.rpartition("_")[2] not in digest(pepper, key)
