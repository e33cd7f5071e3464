"""Master-key rotation against a real Valkey: every secret re-sealed, nothing lost, nothing
in the clear on disk."""

from __future__ import annotations

import asyncio
import base64
import os
import secrets
from collections.abc import Callable, Iterator

import pytest
import redis

from webhook_service.crypto import SecretBox, generate_master_key
from webhook_service.embedded import EmbeddedValkey
from webhook_service.ids import new_id
from webhook_service.rekey import RekeyReport, main, rotate_master_key
from webhook_service.store import keys
from webhook_service.store.connect import async_client, sync_client
from webhook_service.store.endpoints import (
    EndpointRecord,
    EndpointStore,
    SealedSecret,
    decode_headers,
    decode_secrets,
    open_headers,
    seal_headers,
)
from webhook_service.store.scripts import Scripts
from webhook_service.timeutil import now_ms

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

OLD = generate_master_key()
NEW = generate_master_key()


@pytest.fixture
def client(fresh_valkey: EmbeddedValkey) -> Iterator[redis.Redis]:
    connection = sync_client(fresh_valkey.url)
    try:
        yield connection
    finally:
        connection.close()


async def _with_store(url: str, records: list[EndpointRecord], delete: list[str]) -> None:
    connection = async_client(url)
    try:
        store = EndpointStore(connection, Scripts(connection))
        for record in records:
            await store.save(record, creating=True)
        for endpoint_id in delete:
            await store.delete(endpoint_id)
    finally:
        await connection.aclose()


def save(url: str, *records: EndpointRecord) -> None:
    asyncio.run(_with_store(url, list(records), []))


def delete(url: str, endpoint_id: str) -> None:
    asyncio.run(_with_store(url, [], [endpoint_id]))


def v1_token(key: str, plaintext: str, associated: str) -> str:
    """A secret as the first release sealed it: ``v1:`` and no key id."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce = os.urandom(12)
    sealed = AESGCM(base64.b64decode(key)).encrypt(nonce, plaintext.encode(), associated.encode())
    return "v1:" + base64.b64encode(nonce + sealed).decode()


def record(endpoint_id: str, sealed: list[SealedSecret]) -> EndpointRecord:
    now = now_ms()
    return EndpointRecord(
        id=endpoint_id,
        url=f"https://example.com/{endpoint_id}",
        description="",
        event_types=None,
        disabled=False,
        created_ms=now,
        updated_ms=now,
        secrets=sealed,
    )


def plain_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()


def populate(url: str, count: int) -> dict[str, list[str]]:
    """``count`` endpoints sealed under OLD, some in the v1 format, one with a grace key."""
    old_box = SecretBox(OLD)
    plain: dict[str, list[str]] = {}
    for n in range(count):
        endpoint_id = new_id("ep")
        values = [plain_secret()] + ([plain_secret()] if n % 3 == 0 else [])
        sealed = [
            SealedSecret(
                v1_token(OLD, value, endpoint_id) if n % 2 else old_box.seal(value, endpoint_id),
                None if i == 0 else now_ms() + 3_600_000,
            )
            for i, value in enumerate(values)
        ]
        save(url, record(endpoint_id, sealed))
        plain[endpoint_id] = values
    return plain


def stored(client: redis.Redis, endpoint_id: str) -> list[SealedSecret]:
    text = client.hget(keys.endpoint(endpoint_id), "secrets")
    assert isinstance(text, str)
    return decode_secrets(text)


def assert_all_open_with_new_alone(client: redis.Redis, plain: dict[str, list[str]]) -> None:
    new_only = SecretBox(NEW)
    for endpoint_id, values in plain.items():
        sealed = stored(client, endpoint_id)
        assert [s.sealed.split(":")[:2] for s in sealed] == [["v2", new_only.current_kid]] * len(
            values
        )
        assert [new_only.open(s.sealed, endpoint_id) for s in sealed] == values


def test_rotation_reseals_everything_and_is_idempotent(
    fresh_valkey: EmbeddedValkey, client: redis.Redis
) -> None:
    plain = populate(fresh_valkey.url, 7)
    expiries = {
        endpoint_id: [s.expires_ms for s in stored(client, endpoint_id)] for endpoint_id in plain
    }

    report = rotate_master_key(client, SecretBox(OLD), SecretBox(NEW), batch=3)  # 3 pages

    assert report == RekeyReport(resealed=7, already_current=0, missing=0)
    assert_all_open_with_new_alone(client, plain)
    # Grace expiries and every other field are untouched.
    assert {e: [s.expires_ms for s in stored(client, e)] for e in plain} == expiries
    for endpoint_id in plain:
        assert (
            client.hget(keys.endpoint(endpoint_id), "url") == f"https://example.com/{endpoint_id}"
        )

    again = rotate_master_key(client, SecretBox(OLD), SecretBox(NEW), batch=2)
    assert again == RekeyReport(resealed=0, already_current=7, missing=0)

    client.bgrewriteaof()  # the rewritten AOF holds only the final state: check it too
    fresh_valkey.stop()  # flushes and fsyncs the AOF
    aof = b"".join(p.read_bytes() for p in (fresh_valkey.directory / "appendonlydir").iterdir())
    assert keys.endpoint(next(iter(plain))).encode() in aof  # the grep looks at real data
    for values in plain.values():
        for value in values:
            assert value.encode() not in aof
            assert value.split("_", 1)[1].encode() not in aof


def test_rotation_reseals_header_values(fresh_valkey: EmbeddedValkey, client: redis.Redis) -> None:
    """Header values (the receiver's credentials) are sealed like secrets and move with them;
    also when the secrets already are under the new key and only the headers are not."""
    old_box, new_box = SecretBox(OLD), SecretBox(NEW)
    values: dict[str, dict[str, str]] = {}
    for secret_box in (old_box, new_box):
        endpoint_id = new_id("ep")
        values[endpoint_id] = {"Authorization": f"Bearer {secrets.token_hex(16)}", "X-N": "1"}
        made = record(endpoint_id, [SealedSecret(secret_box.seal(plain_secret(), endpoint_id))])
        made.sealed_headers = seal_headers(old_box, endpoint_id, values[endpoint_id])
        save(fresh_valkey.url, made)

    report = rotate_master_key(client, old_box, new_box)

    assert report == RekeyReport(resealed=2, already_current=0, missing=0)
    for endpoint_id, plain in values.items():
        text = client.hget(keys.endpoint(endpoint_id), "headers")
        assert isinstance(text, str)
        sealed = decode_headers(text)
        assert all(new_box.sealed_with_current(token) for token in sealed.values())
        assert open_headers(SecretBox(NEW), endpoint_id, sealed) == plain
        assert all(new_box.sealed_with_current(s.sealed) for s in stored(client, endpoint_id))
    again = rotate_master_key(client, old_box, new_box)
    assert again == RekeyReport(resealed=0, already_current=2, missing=0)


def test_keyring_box_as_both_sides_and_partial_state(
    fresh_valkey: EmbeddedValkey, client: redis.Redis
) -> None:
    """Step 1 of the procedure: processes already seal with NEW while OLD tokens remain."""
    plain = populate(fresh_valkey.url, 3)
    ring = SecretBox(NEW, [OLD])
    fresh = new_id("ep")
    value = plain_secret()
    save(fresh_valkey.url, record(fresh, [SealedSecret(ring.seal(value, fresh))]))
    plain[fresh] = [value]

    report = rotate_master_key(client, ring, ring)

    assert report == RekeyReport(resealed=3, already_current=1, missing=0)
    assert_all_open_with_new_alone(client, plain)


class _Meddling(SecretBox):
    """An old box that lets a concurrent writer in while one endpoint is being re-sealed."""

    def __init__(self, key: str, hook_on: str, hook: Callable[[], None]) -> None:
        super().__init__(key)
        self._hook_on = hook_on
        self._hook = hook
        self.calls = 0

    def open(self, token: str, associated: str) -> str:
        if associated == self._hook_on and self.calls == 0:
            self.calls += 1
            self._hook()
        return super().open(token, associated)


def test_concurrent_secret_rotation_and_deletion_are_not_lost(
    fresh_valkey: EmbeddedValkey, client: redis.Redis
) -> None:
    plain = populate(fresh_valkey.url, 4)
    first, *_, last = sorted(plain)
    added = plain_secret()

    def meddle() -> None:
        # Mid re-seal of the first endpoint: its secret is rotated by an API process that
        # already runs with the new key, and the last endpoint is deleted.
        sealed = stored(client, first)
        rotated_in = SealedSecret(SecretBox(NEW, [OLD]).seal(added, first))
        grace = [SealedSecret(s.sealed, now_ms() + 60_000) for s in sealed]
        save(fresh_valkey.url, record(first, [rotated_in, *grace]))
        delete(fresh_valkey.url, last)

    meddling = _Meddling(OLD, first, meddle)
    report = rotate_master_key(client, meddling, SecretBox(NEW))

    assert meddling.calls == 1

    assert report == RekeyReport(resealed=3, already_current=0, missing=1)
    plain[first] = [added, *plain[first]]
    del plain[last]
    assert_all_open_with_new_alone(client, plain)


def test_cli_rotates_with_the_settings_key(
    fresh_valkey: EmbeddedValkey,
    client: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    plain = populate(fresh_valkey.url, 2)
    monkeypatch.setenv("WEBHOOK_REDIS_URL", fresh_valkey.url)
    monkeypatch.setenv("WEBHOOK_MASTER_KEY", OLD)
    monkeypatch.delenv("WEBHOOK_PREVIOUS_MASTER_KEYS", raising=False)

    assert main(["--new-key", NEW]) == 0

    out = capsys.readouterr().out
    assert "resealed: 2" in out
    assert NEW in out
    assert OLD not in out
    assert "WEBHOOK_PREVIOUS_MASTER_KEYS" in out
    assert_all_open_with_new_alone(client, plain)


def test_cli_without_a_new_key_generates_one_and_writes_nothing(
    fresh_valkey: EmbeddedValkey,
    client: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    plain = populate(fresh_valkey.url, 1)
    before = {e: stored(client, e) for e in plain}
    monkeypatch.setenv("WEBHOOK_REDIS_URL", fresh_valkey.url)
    monkeypatch.setenv("WEBHOOK_MASTER_KEY", OLD)

    assert main([]) == 0

    out = capsys.readouterr().out
    generated = out.split("new master key: ", 1)[1].split()[0]
    SecretBox(generated)  # a valid key
    assert f"--new-key {generated}" in out
    assert {e: stored(client, e) for e in plain} == before


def test_cli_refuses_a_bad_new_key(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("WEBHOOK_REDIS_URL", "redis://127.0.0.1:1/0")
    monkeypatch.setenv("WEBHOOK_MASTER_KEY", OLD)
    assert main(["--new-key", "short"]) == 2
    assert "short" not in capsys.readouterr().err
