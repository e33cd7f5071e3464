"""`webhook-service migrate` and the schema marker, against a real Valkey: a store written
before header values were sealed is refused by every process until it is migrated, then
delivers; a fresh store starts without migrating."""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import aiohttp
import pytest
import redis
from redis.asyncio import Redis

from signer import generate_secret
from tests.integration.conftest import send_event, serve_api, settings_for, wait_for
from tests.support.apikeys import redis_contents
from tests.support.receiver import Receiver
from tests.support.replies import text
from tests.support.stack import ADMIN_KEY, Stack, service_env
from webhook_service.crypto import SecretBox, generate_master_key
from webhook_service.embedded import EmbeddedValkey, free_port
from webhook_service.ids import new_id
from webhook_service.migrate import migrate
from webhook_service.store import keys, schema
from webhook_service.store.connect import async_client, sync_client
from webhook_service.store.endpoints import (
    EndpointRecord,
    EndpointStore,
    SealedSecret,
    decode_headers,
    encode_headers,
    open_headers,
    seal_headers,
)
from webhook_service.store.scripts import Scripts
from webhook_service.timeutil import now_ms

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

REFUSAL = (
    "the store holds data of schema 1; run `webhook-service migrate` "
    "(with the same WEBHOOK_* settings) first"
)


@pytest.fixture
def env(fresh_valkey: EmbeddedValkey) -> dict[str, str]:
    return service_env(fresh_valkey.url)


async def old_endpoint(
    url: str, box: SecretBox, target: str, headers: Mapping[str, str], event_type: str
) -> tuple[str, str]:
    """An endpoint as the releases before sealed header values wrote it: its signing secret
    sealed, its ``headers`` field the JSON of names and values in clear (they wrote
    ``orjson.dumps(record.headers)``, the very encoding of ``encode_headers``). Returns its
    id and signing secret."""
    at = now_ms()
    endpoint_id = new_id("ep", at)
    secret = generate_secret()
    record = EndpointRecord(
        id=endpoint_id,
        url=target,
        description="",
        event_types=[event_type],
        disabled=False,
        created_ms=at,
        updated_ms=at,
        secrets=[SealedSecret(box.seal(secret, endpoint_id))],
        sealed_headers=dict(headers),  # in clear: what the old code stored
    )
    client = async_client(url)
    try:
        await EndpointStore(client, Scripts(client)).save(record, creating=True)
    finally:
        await client.aclose()
    return endpoint_id, secret


async def stored(url: str) -> str:
    """Every key in Valkey with its whole value."""
    client = Redis.from_url(url)
    try:
        return repr(await redis_contents(client, skip=(), match="*"))
    finally:
        await client.aclose()


def run(args: list[str], env: Mapping[str, str], timeout: float = 60) -> tuple[int, str]:
    """``python -m webhook_service *args``: its exit status and everything it wrote. A process
    still running after ``timeout`` (one that serves) fails the test."""
    process = subprocess.Popen(
        [sys.executable, "-m", "webhook_service", *args],
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        out, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
        process.communicate()
        raise AssertionError(f"`{' '.join(args)}` did not exit within {timeout}s") from None
    return process.returncode, out.decode()


def aof(server: EmbeddedValkey) -> bytes:
    return b"".join(p.read_bytes() for p in Path(server.directory).rglob("*.aof*") if p.is_file())


def rewritten(server: EmbeddedValkey) -> bool:
    client = sync_client(server.url)
    try:
        info = client.info("persistence")
    finally:
        client.close()
    return not int(info["aof_rewrite_in_progress"]) and not int(info["aof_rewrite_scheduled"])


async def test_an_old_store_is_refused_until_migrated_then_delivers_its_headers(
    fresh_valkey: EmbeddedValkey, env: dict[str, str], receiver: Receiver, tmp_path: Path
) -> None:
    box = SecretBox(env["WEBHOOK_MASTER_KEY"])
    token = "rcv-" + secrets.token_hex(16)
    tenant = "tenant-" + secrets.token_hex(16)
    plain = {"Authorization": f"Bearer {token}", "X-Tenant": tenant}
    endpoint_id, secret = await old_endpoint(
        fresh_valkey.url, box, receiver.url("old"), plain, "migrate.test"
    )
    receiver.secrets["old"] = [secret]
    assert token in await stored(fresh_valkey.url)  # the search below does see clear values

    port = str(free_port())
    for role in ("api", "worker", "scheduler"):
        status, out = run([role], {**env, "WEBHOOK_HOST": "127.0.0.1", "WEBHOOK_PORT": port})
        assert status != 0, (role, out)
        assert REFUSAL in out, (role, out)
    client = sync_client(fresh_valkey.url)
    try:
        assert client.get(keys.SCHEMA) is None  # refusing stamps nothing
    finally:
        client.close()

    status, out = run(["migrate"], env)
    assert status == 0, out
    assert out.splitlines()[0] == "sealed headers of 1 endpoints; store is at schema 2"
    everything = await stored(fresh_valkey.url)
    assert token not in everything and tenant not in everything
    assert "X-Tenant" in everything  # names stay in clear
    client = sync_client(fresh_valkey.url)
    try:
        assert client.get(keys.SCHEMA) == "2"
        sealed = _headers(client, endpoint_id)
        after_first = client.hgetall(keys.endpoint(endpoint_id))
    finally:
        client.close()
    assert all(box.sealed_with_current(v) for v in sealed.values())
    assert open_headers(box, endpoint_id, sealed) == plain
    # The migration had the AOF rewritten: the clear values leave the disk too.
    for _ in range(200):
        if rewritten(fresh_valkey):
            break
        time.sleep(0.05)
    assert token.encode() not in aof(fresh_valkey) and tenant.encode() not in aof(fresh_valkey)

    stack = Stack(tmp_path, fresh_valkey, env)
    stack.start("worker", "worker0")
    stack.start("scheduler")
    try:
        async with serve_api(settings_for(stack)) as (_, api):
            status, shown, _ = await api.call("GET", f"/v1/endpoints/{endpoint_id}")
            assert status == 200, shown
            assert shown["headers"] == plain
            event_id = await send_event(api, "migrate.test", {"n": 1})

            async def arrived() -> bool:
                return any(r.webhook_id == event_id for r in receiver.for_endpoint("old"))

            await wait_for(arrived, timeout=60)
        [got] = [r for r in receiver.for_endpoint("old") if r.webhook_id == event_id]
        assert got.verified
        assert (got.headers["Authorization"], got.headers["X-Tenant"]) == (
            f"Bearer {token}",
            tenant,
        )
    finally:
        for name in list(stack.processes):
            stack.terminate(name)

    status, out = run(["migrate"], env)
    assert status == 0, out
    assert out.strip() == "nothing to migrate: the store is at schema 2 already"
    client = sync_client(fresh_valkey.url)
    try:
        again = client.hgetall(keys.endpoint(endpoint_id))
    finally:
        client.close()
    # The delivery wrote its own fields; the headers are as the first run left them.
    assert again["headers"] == after_first["headers"]


async def test_a_fresh_store_is_stamped_and_starts_without_migrating(
    fresh_valkey: EmbeddedValkey, env: dict[str, str], tmp_path: Path
) -> None:
    stack = Stack(tmp_path, fresh_valkey, env)
    port = free_port()
    stack.start("api", env={"WEBHOOK_HOST": "127.0.0.1", "WEBHOOK_PORT": str(port)})
    base = f"http://127.0.0.1:{port}"
    try:

        async def up() -> bool:
            try:
                async with (
                    aiohttp.ClientSession() as session,
                    session.get(base + "/healthz") as response,
                ):
                    return response.status == 200
            except aiohttp.ClientError:
                return False

        await wait_for(up, timeout=60)
        client = sync_client(fresh_valkey.url)
        try:
            assert client.get(keys.SCHEMA) == str(schema.CURRENT)
        finally:
            client.close()
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                base + "/v1/endpoints",
                json={"url": "http://127.0.0.1:9/hook", "headers": {"X-Token": "t"}},
                headers={"Authorization": f"Bearer {ADMIN_KEY}"},
            ) as response,
        ):
            assert response.status == 201, await response.text()
        # A store with endpoints, stamped at its start: every role starts on it.
        stack.start("worker", "worker0")
        stack.start("scheduler")
        await asyncio.sleep(5)
        for name in ("api", "worker0", "scheduler"):
            assert stack.processes[name].poll() is None, (tmp_path / f"{name}.log").read_text()
    finally:
        for name in list(stack.processes):
            stack.terminate(name)
    logs = "".join((tmp_path / f"{n}.log").read_text() for n in ("api", "worker0", "scheduler"))
    assert "migrate" not in logs


async def test_a_cut_short_run_is_finished_and_nothing_is_sealed_twice(
    fresh_valkey: EmbeddedValkey,
) -> None:
    old_key, key = generate_master_key(), generate_master_key()
    box = SecretBox(key)
    first, _ = await old_endpoint(
        fresh_valkey.url, box, "https://a.example/h", {"X-A": "a1"}, "t.a"
    )
    # Half done, as a run cut short between two endpoints and within none leaves it: one
    # value sealed, one still in clear.
    second, _ = await old_endpoint(
        fresh_valkey.url, box, "https://b.example/h", {"X-B": "b1", "X-C": "c1"}, "t.b"
    )
    # Sealed under a key this run is not given: reported, not sealed again.
    third, _ = await old_endpoint(fresh_valkey.url, box, "https://c.example/h", {}, "t.c")
    client = sync_client(fresh_valkey.url)
    try:
        partly = {**seal_headers(box, second, {"X-B": "b1"}), "X-C": "c1"}
        client.hset(keys.endpoint(second), "headers", encode_headers(partly))
        foreign = seal_headers(SecretBox(old_key), third, {"X-D": "d1"})
        client.hset(keys.endpoint(third), "headers", encode_headers(foreign))

        report = migrate(client, box)
        assert (report.sealed, report.current, report.unopenable) == (
            2,
            1,
            [f"endpoint {third} header X-D"],
        )
        assert client.get(keys.SCHEMA) is None  # not stamped while a value does not open
        assert schema.start_check(fresh_valkey.url) == REFUSAL
        assert _headers(client, third) == foreign
        got = _headers(client, second)
        assert got["X-B"] == partly["X-B"]  # left as it was
        assert open_headers(box, second, got) == {"X-B": "b1", "X-C": "c1"}

        # Run again with the key that sealed it: the rest opens, the store is stamped.
        report = migrate(client, SecretBox(key, [old_key]))
        assert (report.sealed, report.current, report.unopenable) == (0, 3, [])
        assert client.get(keys.SCHEMA) == "2"
        assert schema.start_check(fresh_valkey.url) is None
        assert open_headers(box, first, _headers(client, first)) == {"X-A": "a1"}
        report = migrate(client, box)
        assert not report.changed
    finally:
        client.close()


def test_a_store_of_a_later_schema_is_refused(fresh_valkey: EmbeddedValkey) -> None:
    client = sync_client(fresh_valkey.url)
    try:
        client.set(keys.SCHEMA, schema.CURRENT + 1)
        refused = schema.start_check(fresh_valkey.url)
        assert refused is not None and "schema 3, newer than this release" in refused
        with pytest.raises(schema.SchemaMismatch):
            migrate(client, SecretBox(generate_master_key()))
    finally:
        client.close()


def _headers(client: redis.Redis, endpoint_id: str) -> dict[str, str]:
    return decode_headers(text(client.hget(keys.endpoint(endpoint_id), "headers")) or "")
