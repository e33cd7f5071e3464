"""`webhook-service migrate` and the schema marker, against a real Valkey: a store written
before header values were sealed is refused by every process until it is migrated, then
delivers; a fresh store starts without migrating. A data dir written by today's release
(schema 2, tests/support/release_data.py) has its history moved into the log, on SQLite and
on PostgreSQL, keeps only its work in flight in Redis, which a real worker then delivers; a
second run changes nothing, and a run killed half-way then run again ends as one left
alone."""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, cast

import aiohttp
import orjson
import pytest
import redis
import sqlalchemy as sa
from redis.asyncio import Redis

from signer import generate_secret
from tests.integration.conftest import (
    LOG_BACKENDS,
    Api,
    send_event,
    serve_api,
    settings_for,
    wait_for,
)
from tests.support.apikeys import redis_contents
from tests.support.buckets import legacy_layout
from tests.support.postgres import log_env
from tests.support.receiver import Receiver
from tests.support.release_data import ReleaseData, release_tree, write
from tests.support.replies import text
from tests.support.stack import ADMIN_KEY, Stack, migrate_log, service_env, settings_of
from webhook_service.crypto import SecretBox, generate_master_key
from webhook_service.embedded import EmbeddedValkey, free_port, start_valkey
from webhook_service.history import tables
from webhook_service.history.database import SQLITE_FILE, check_current, sync_engine, upgrade
from webhook_service.ids import (
    delivery_id,
    delivery_tail,
    id_time_ms,
    mark_of,
    new_id,
    seq_tail,
    set_epoch,
    uid_mark,
)
from webhook_service.migrate import migrate
from webhook_service.store import keys, schema, tenancy_migration
from webhook_service.store.apikeys import ApiKeyStore
from webhook_service.store.applications import (
    DEFAULT_APP_ID,
    ApplicationOutcome,
    ApplicationRecord,
    ApplicationStore,
)
from webhook_service.store.connect import async_client, sync_client
from webhook_service.store.deliveries import (
    Attempt,
    AttemptOutcome,
    DeliveryStore,
    HealthPolicy,
    RecordOutcome,
)
from webhook_service.store.endpoints import (
    EndpointRecord,
    EndpointStore,
    SealedSecret,
    decode_headers,
    encode_headers,
    open_headers,
    seal_headers,
)
from webhook_service.store.events import EventStore, IdempotencyClaim, IngestOutcome
from webhook_service.store.jobs import JobStore
from webhook_service.store.scripts import Scripts
from webhook_service.store.tenancy_migration import Destination, DestinationRefused
from webhook_service.timeutil import now_ms

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

REFUSAL = (
    "the store holds data of schema 1; run `webhook-service migrate` "
    "(with the same WEBHOOK_* settings) first"
)


@pytest.fixture
def env(fresh_valkey: EmbeddedValkey, tmp_path: Path) -> dict[str, str]:
    return service_env(fresh_valkey.url, {"WEBHOOK_DATA_DIR": str(tmp_path)})


@pytest.fixture
def log(tmp_path: Path) -> Iterator[sa.Engine]:
    """A migrated log of the test's own (SQLite), for ``migrate`` called in-process."""
    engine = sync_engine(settings_of({"WEBHOOK_DATA_DIR": str(tmp_path)}))
    upgrade(engine)
    yield engine
    engine.dispose()


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


def old_names(url: str) -> None:
    """The store's keys given the names the releases before buckets gave them (once every
    old endpoint is made: a second renaming would put one's sets over the other's)."""
    client = sync_client(url)
    try:
        legacy_layout(client)
    finally:
        client.close()


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
    old_names(fresh_valkey.url)
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
    assert "sealed headers of 1 endpoints" in out.splitlines()
    assert f"store is at schema {schema.CURRENT}" in out.splitlines()
    everything = await stored(fresh_valkey.url)
    assert token not in everything and tenant not in everything
    assert "X-Tenant" in everything  # names stay in clear
    client = sync_client(fresh_valkey.url)
    try:
        assert client.get(keys.SCHEMA) == str(schema.CURRENT)
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
    assert out.strip() == f"nothing to migrate: the store is at schema {schema.CURRENT} already"
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
    # The log's database is the operator's to migrate (`up` does it for its own SQLite);
    # the store is stamped by the first process.
    migrate_log(env)
    stack = Stack(tmp_path, fresh_valkey, env)
    port = free_port()
    stack.start("api", env={"WEBHOOK_HOST": "127.0.0.1", "WEBHOOK_PORT": str(port)})
    base = f"http://127.0.0.1:{port}"
    try:
        await wait_for(lambda: _healthy(base), timeout=60)
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


async def _healthy(base: str) -> bool:
    try:
        async with aiohttp.ClientSession() as session, session.get(base + "/healthz") as response:
            return response.status == 200
    except aiohttp.ClientError:
        return False


def test_the_api_and_the_scheduler_refuse_a_log_behind_or_ahead(env: dict[str, str]) -> None:
    engine = sync_engine(settings_of(env))
    try:
        refusal = check_current(engine)
        # The revision it names is the newest migration's, whichever that is.
        assert refusal is not None and refusal.startswith(
            "the delivery log's database is not migrated yet, this release needs "
        )
        assert refusal.endswith(
            "; run `webhook-service migrate` (with the same WEBHOOK_* settings) first"
        )
        port = str(free_port())
        for role in ("api", "scheduler"):
            status, out = run([role], {**env, "WEBHOOK_HOST": "127.0.0.1", "WEBHOOK_PORT": port})
            assert status != 0 and refusal in out, (role, out)
        upgrade(engine)
        assert check_current(engine) is None
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE alembic_version SET version_num = '9999'"))
        refused = check_current(engine)
        assert refused is not None and "at revision 9999, newer than this release" in refused
    finally:
        engine.dispose()


async def test_a_log_out_of_reach_does_not_keep_the_api_from_starting(
    fresh_valkey: EmbeddedValkey, env: dict[str, str], tmp_path: Path
) -> None:
    """Delivery goes on while the log is away, and so does a start: its revision waits."""
    away = f"postgresql://whs@127.0.0.1:{free_port()}/log"
    stack = Stack(tmp_path, fresh_valkey, {**env, "WEBHOOK_LOG_URL": away})
    port = free_port()
    stack.start("api", env={"WEBHOOK_HOST": "127.0.0.1", "WEBHOOK_PORT": str(port)})
    try:
        await wait_for(lambda: _healthy(f"http://127.0.0.1:{port}"), timeout=60)
    finally:
        stack.terminate("api")
    assert "the delivery log's database cannot be reached" in (tmp_path / "api.log").read_text()


async def test_a_cut_short_run_is_finished_and_nothing_is_sealed_twice(
    fresh_valkey: EmbeddedValkey, log: sa.Engine
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
    old_names(fresh_valkey.url)
    client = sync_client(fresh_valkey.url)
    try:
        # Under the names of the layout before buckets, as the old endpoints are.
        partly = {**seal_headers(box, second, {"X-B": "b1"}), "X-C": "c1"}
        client.hset(keys.untagged(keys.endpoint(second)), "headers", encode_headers(partly))
        foreign = seal_headers(SecretBox(old_key), third, {"X-D": "d1"})
        client.hset(keys.untagged(keys.endpoint(third)), "headers", encode_headers(foreign))

        report = migrate(client, box, log)
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
        report = migrate(client, SecretBox(key, [old_key]), log)
        assert (report.sealed, report.current, report.unopenable) == (0, 3, [])
        assert client.get(keys.SCHEMA) == str(schema.CURRENT)
        assert schema.start_check(fresh_valkey.url) is None
        assert open_headers(box, first, _headers(client, first)) == {"X-A": "a1"}
        report = migrate(client, box, log)
        assert not report.changed
    finally:
        client.close()


def test_a_store_of_a_later_schema_is_refused(fresh_valkey: EmbeddedValkey, log: sa.Engine) -> None:
    client = sync_client(fresh_valkey.url)
    try:
        client.set(keys.SCHEMA, schema.CURRENT + 1)
        refused = schema.start_check(fresh_valkey.url)
        assert refused is not None
        assert f"schema {schema.CURRENT + 1}, newer than this release" in refused
        with pytest.raises(schema.SchemaMismatch):
            migrate(client, SecretBox(generate_master_key()), log)
    finally:
        client.close()


def _headers(client: redis.Redis, endpoint_id: str) -> dict[str, str]:
    return decode_headers(text(client.hget(keys.endpoint(endpoint_id), "headers")) or "")


# Schema 3 -> 4: a single-tenant store as schema 3 wrote it, by hand (its release is this
# one's parent: release_data's is schema 2's).
S3_TYPE, S3_OTHER = "s3.order", "s3.other"


def _schema3_store(client: redis.Redis) -> dict[str, str]:
    """Endpoints (one of every type, one of two types, an operations one), a subscription
    set left over by an endpoint long gone, events (ours and a producer's), idempotency
    records and unshipped outbox records, all in schema 3's layout; stamped 3. Returns the
    ids made."""
    at = 1_800_000_000_000
    made = {
        "every": new_id("ep", at), "typed": new_id("ep", at + 1), "ops": new_id("ep", at + 2),
        "event": new_id("msg", at + 3), "ours": new_id("msg", at + 4),
    }  # fmt: skip
    endpoints = {
        "every": ("", "0"), "typed": (f'["{S3_OTHER}","{S3_TYPE}"]', "0"),
        "ops": ("[]", "1"),
    }  # fmt: skip
    for seq, (name, (types, operations)) in enumerate(endpoints.items(), start=1):
        endpoint_id = made[name]
        client.hset(
            keys.endpoint(endpoint_id),
            mapping={
                "url": f"http://127.0.0.1:9/{name}", "description": "", "event_types": types,
                "disabled": "0", "operations": operations, "created": at, "updated": at,
                "secrets": "[]", "headers": "", "seq": seq,
            },
        )  # fmt: skip
        client.zadd(keys.endpoints(0), {endpoint_id: 0})
        client.hset(keys.endpoint_seqs(0), seq_tail(seq), endpoint_id)
        if operations == "1":
            client.sadd(keys.sub_ops(), endpoint_id)
    client.set(keys.endpoint_seq(0), 3)
    client.sadd(keys.SCHEMA3_SUB_ALL, made["every"])
    for event_type in (S3_TYPE, S3_OTHER):
        client.sadd(keys.schema3_sub_type(event_type), made["typed"])
    client.sadd(keys.schema3_sub_type("s3.gone"), "ep_gone")
    client.hset(
        keys.event(made["event"]),
        mapping={"type": S3_TYPE, "body": "{}", "key": "key_1", "dlvs": "", "live": 1},
    )
    client.hset(
        keys.event(made["ours"]),
        mapping={"type": "endpoint.disabled", "body": "{}", "key": "system", "live": 1},
    )
    for idem in ("order-1", "order:2"):
        name = keys.in_bucket(0, "idem", f"key_1:{idem}")
        client.hset(name, mapping={"hash": "fp", "state": "done", "event": made["event"]})
        client.expire(name, 3600)
    record = {"id": made["event"], "type": S3_TYPE, "t": at, "key": "key_1", "dlv": []}
    client.xadd(keys.outbox(0), {"e": orjson.dumps(record).decode(), "b": '{"a": "é"}'})
    ours = {**record, "id": made["ours"], "type": "endpoint.disabled", "key": "system"}
    client.xadd(keys.outbox(0), {"e": orjson.dumps(ours).decode(), "b": "{}"})
    replay = {"ev": made["event"], "type": S3_TYPE, "t": at + 9, "dlv": []}
    client.xadd(keys.outbox(0), {"p": orjson.dumps(replay).decode()})
    client.xadd(keys.outbox(0), {"x": orjson.dumps({"ev": made["event"], "t": at}).decode()})
    schema.stamp(client, 3)
    legacy_layout(client)  # written with today's names: given schema 3's
    return made


def _outbox_entries(client: redis.Redis) -> list[tuple[str, dict[str, str]]]:
    # sync_client decodes replies.
    return cast(list[tuple[str, dict[str, str]]], client.xrange(keys.outbox(0)))


async def test_a_single_tenant_store_moves_into_the_default_application(
    fresh_valkey: EmbeddedValkey, log: sa.Engine
) -> None:
    client = sync_client(fresh_valkey.url)
    try:
        made = _schema3_store(client)
        entries_before = cast(
            list[tuple[str, dict[str, str]]], client.xrange(keys.untagged(keys.outbox(0)))
        )

        report = migrate(client, SecretBox(generate_master_key()), log)

        assert report.tenancy == tenancy_migration.Moved(
            endpoints=3, events=2, idempotency=2, outbox=3, stale_subscriptions=1
        )
        assert client.get(keys.SCHEMA) == str(schema.CURRENT)
        assert schema.start_check(fresh_valkey.url) is None
        # The default application, dated by the oldest endpoint, holding every endpoint.
        default = client.hgetall(keys.app(DEFAULT_APP_ID))
        assert (default["uid"], default["created"]) == ("default", str(id_time_ms(made["every"])))
        assert client.hget(keys.apps_uid("default"), "default") == DEFAULT_APP_ID
        endpoints = [made[n] for n in ("every", "typed", "ops")]
        assert client.zrange(keys.app_endpoints(DEFAULT_APP_ID), 0, -1) == endpoints
        assert [client.hget(keys.endpoint(e), "app") for e in endpoints] == [DEFAULT_APP_ID] * 3
        # Its subscriptions, and none of schema 3's left.
        assert client.smembers(keys.sub_all(DEFAULT_APP_ID)) == {made["every"]}
        for event_type in (S3_TYPE, S3_OTHER):
            assert client.smembers(keys.sub_type(DEFAULT_APP_ID, event_type)) == {made["typed"]}
        assert client.smembers(keys.sub_ops()) == {made["ops"]}
        old = [keys.SCHEMA3_SUB_ALL] + [
            keys.schema3_sub_type(t) for t in (S3_TYPE, S3_OTHER, "s3.gone")
        ]
        assert not client.exists(*old)
        # Events: the producer's in the default application, ours in none.
        assert client.hget(keys.event(made["event"]), "app") == DEFAULT_APP_ID
        assert client.hget(keys.event(made["ours"]), "app") == ""
        # Idempotency records renamed, their expiry kept.
        assert not [k for k in client.scan_iter(match=keys.in_bucket(0, "idem", "key_*"))]
        for idem in ("order-1", "order:2"):
            name = keys.idempotency(DEFAULT_APP_ID, "key_1", idem)
            assert client.hget(name, "event") == made["event"]
            assert 0 < client.ttl(name) <= 3600
            assert keys.idempotency_key_of(name, "key_1") is None  # schema 3's layout only
        # The outbox: the same entries, under the same ids, each record with its application.
        entries = _outbox_entries(client)
        assert [i for i, _ in entries] == [i for i, _ in entries_before]
        assert [orjson.loads(f.get("e") or f.get("p") or "{}").get("app") for _, f in entries] == [
            DEFAULT_APP_ID, "", DEFAULT_APP_ID, None,
        ]  # fmt: skip
        assert entries[0][1]["b"] == '{"a": "é"}' and entries[3] == entries_before[3]
        assert not client.exists(keys.SCHEMA3_OUTBOX_COPY)
        after = await stored(fresh_valkey.url)

        # Again: nothing changes.
        again = migrate(client, SecretBox(generate_master_key()), log)
        assert not again.changed and again.tenancy is None
        assert await stored(fresh_valkey.url) == after
        # A run cut short after its moves, before its stamp, runs again to the same end.
        schema.stamp(client, 3)
        stamped = await stored(fresh_valkey.url)
        # Not into another application than it began with: the store would end split.
        with pytest.raises(DestinationRefused, match=r"again without --application$"):
            migrate(client, SecretBox(generate_master_key()), log, destination=Destination(NAMED))
        assert await stored(fresh_valkey.url) == stamped
        rerun = migrate(client, SecretBox(generate_master_key()), log)
        assert rerun.tenancy == tenancy_migration.Moved()
        assert await stored(fresh_valkey.url) == after
    finally:
        client.close()

    # The store serves: the endpoints are the default application's, and an event reaches
    # them by the new subscriptions.
    store = async_client(fresh_valkey.url)
    try:
        scripts = Scripts(store)
        listed, _ = await EndpointStore(store, scripts).page(10, None, DEFAULT_APP_ID)
        assert {r.id for r in listed} == set(endpoints)
        accepted = await EventStore(store, scripts).accept(
            event_id=new_id("msg"), event_type=S3_TYPE, body="{}", key_id="key_1",
            now_ms=now_ms(), budget=1, grace_ms=0, idempotency=None, wakeup=None,
            backlog_max=1000,
        )  # fmt: skip
        assert (accepted.outcome, accepted.fanout) == (IngestOutcome.CREATED, 2)
    finally:
        await store.aclose()


# The same store moved into an application the operator names (migrate --application), with a
# uid of another bucket than the store's: its log rows, the default application's until now
# (as migration 0002 and the schema 2 -> 3 step wrote them), go with it.
NAMED, NAMED_UID = "Acme", "acme"


def _logged_history(engine: sa.Engine, endpoint_id: str) -> dict[str, str]:
    """An event delivered once, and one of ours, in the log as a single-tenant release's
    rows stand once the log is migrated: the default application's, ours of none."""
    at = 1_799_000_000_000
    logged = {"event": new_id("msg", at), "ours": new_id("msg", at + 1)}
    logged["delivery"] = delivery_id(logged["event"], endpoint_id, 1)
    body = orjson.dumps({"type": S3_TYPE, "timestamp": "2027-01-01T00:00:00Z", "data": {}})
    with engine.begin() as conn:
        for event_id, event_type, application in (
            (logged["event"], S3_TYPE, DEFAULT_APP_ID), (logged["ours"], "endpoint.disabled", None),
        ):  # fmt: skip
            conn.execute(
                sa.insert(tables.events).values(
                    id=event_id, created_ms=id_time_ms(event_id), type=event_type,
                    key_id="key_1", body=body.decode(), application=application,
                )
            )  # fmt: skip
        conn.execute(
            sa.insert(tables.deliveries).values(
                id=logged["delivery"], created_ms=at, event_id=logged["event"],
                endpoint_id=endpoint_id, event_type=S3_TYPE, status="succeeded", attempts=1,
                updated_ms=at + 5, last_code=204, log_seq=1, application=DEFAULT_APP_ID,
            )
        )  # fmt: skip
        conn.execute(
            sa.insert(tables.attempts).values(
                delivery_id=logged["delivery"], number=1, created_ms=at, duration_ms=5,
                status_code=204, response_body="", request_headers={}, response_headers={},
            )
        )  # fmt: skip
    return logged


async def _ids(api: Api, path: str) -> list[str]:
    status, body, _ = await api.call("GET", path)
    assert status == 200, (path, body)
    return [item["id"] for item in body["data"]]


async def test_a_single_tenant_store_moves_into_the_application_named(
    fresh_valkey: EmbeddedValkey, env: dict[str, str], log: sa.Engine
) -> None:
    assert keys.uid_bucket(NAMED_UID) != 0  # its mapping is kept outside the store's bucket
    client = sync_client(fresh_valkey.url)
    try:
        made = _schema3_store(client)
        logged = _logged_history(log, made["every"])
        untouched = await stored(fresh_valkey.url)
        # A name or uid the API would refuse is refused before anything is touched.
        status, out = run(["migrate", "--application", "Acme", "--uid", "app_acme"], env)
        assert status == 2 and "--uid: Value error, a uid may not start with app_" in out, out
        assert await stored(fresh_valkey.url) == untouched

        status, out = run(["migrate", "--application", NAMED, "--uid", NAMED_UID], env)
        assert status == 0, out
        app_id = text(client.hget(keys.apps_uid(NAMED_UID), NAMED_UID)) or ""
        assert app_id.startswith("app_") and app_id != DEFAULT_APP_ID
        lines = out.splitlines()
        assert (
            f"moved into the application ({app_id}): 3 endpoints, 2 events, 2 idempotency "
            "records, 3 log records not yet shipped"
        ) in lines, out
        assert (
            "gave it the log's 2 events and deliveries; 1 operations endpoints stay in the "
            "default application; the flat routes act on the default application, which holds "
            f"nothing else: the rest is under /v1/applications/{app_id}/…"
        ) in lines, out
        assert f"store is at schema {schema.CURRENT}" in lines, out

        # The application, of the store's bucket, dated by its oldest endpoint; its uid
        # mapped in the uid's own bucket, where a lookup looks.
        assert keys.bucket_of(app_id) == 0
        record = client.hgetall(keys.app(app_id))
        assert (record["name"], record["uid"]) == (NAMED, NAMED_UID)
        assert record["created"] == str(id_time_ms(made["every"]))
        assert client.zrange(keys.apps(0), 0, -1) == sorted([DEFAULT_APP_ID, app_id])
        # Its endpoints and subscriptions; the operations endpoint stays in the default one.
        moved = [made["every"], made["typed"]]
        assert client.zrange(keys.app_endpoints(app_id), 0, -1) == moved
        assert client.zrange(keys.app_endpoints(DEFAULT_APP_ID), 0, -1) == [made["ops"]]
        assert [client.hget(keys.endpoint(e), "app") for e in moved] == [app_id] * 2
        assert client.smembers(keys.sub_all(app_id)) == {made["every"]}
        for event_type in (S3_TYPE, S3_OTHER):
            assert client.smembers(keys.sub_type(app_id, event_type)) == {made["typed"]}
        assert not client.exists(
            keys.sub_all(DEFAULT_APP_ID), keys.sub_type(DEFAULT_APP_ID, S3_TYPE)
        )
        # Its events, idempotency records and unshipped records; ours in none.
        assert client.hget(keys.event(made["event"]), "app") == app_id
        assert client.hget(keys.event(made["ours"]), "app") == ""
        for idem in ("order-1", "order:2"):
            name = keys.idempotency(app_id, "key_1", idem)
            assert client.hget(name, "event") == made["event"]
            assert 0 < client.ttl(name) <= 3600
        assert [
            orjson.loads(f.get("e") or f.get("p") or "{}").get("app")
            for _, f in _outbox_entries(client)
        ] == [app_id, "", app_id, None]
        # The log's rows: the application's, ours of none still.
        with log.connect() as conn:
            owners = dict(
                conn.execute(sa.select(tables.events.c.id, tables.events.c.application)).all()
            )
            delivered = conn.execute(sa.select(tables.deliveries.c.application)).scalars().all()
        assert owners == {logged["event"]: app_id, logged["ours"]: None}
        assert delivered == [app_id]
        after = await stored(fresh_valkey.url)

        # Past the step, the option is refused (the store is in applications already), and
        # a run without it has nothing to do.
        status, out = run(["migrate", "--application", NAMED], env)
        assert status == 1, out
        assert (
            f"error: the store is at schema {schema.CURRENT}: its data is in applications already"
        ) in out, out
        status, out = run(["migrate"], env)
        assert (status, out.strip()) == (
            0, f"nothing to migrate: the store is at schema {schema.CURRENT} already"
        ), out  # fmt: skip
        assert await stored(fresh_valkey.url) == after
        # A run cut short before its stamp finishes with the same options, finding the
        # application it made; with others it is refused, writing nothing.
        schema.stamp(client, 3)
        stamped = await stored(fresh_valkey.url)
        for refused in (Destination("Other"), Destination(NAMED, "acme-2"), Destination()):
            with pytest.raises(
                DestinationRefused, match="again with --application 'Acme' --uid 'acme'"
            ):
                migrate(client, SecretBox(generate_master_key()), log, destination=refused)
        assert await stored(fresh_valkey.url) == stamped
        rerun = migrate(
            client, SecretBox(generate_master_key()), log, destination=Destination(NAMED, NAMED_UID)
        )
        assert rerun.tenancy == tenancy_migration.Moved(application=app_id)
        assert rerun.log_rows == 0
        assert await stored(fresh_valkey.url) == after
    finally:
        client.close()

    async with serve_api(settings_of(env)) as (_, api):
        # Under the application, by its uid as by its id: everything moved.
        for ref in (NAMED_UID, app_id):
            base = f"/v1/applications/{ref}"
            assert sorted(await _ids(api, base + "/endpoints")) == sorted(moved)
            assert await _ids(api, base + "/events") == [logged["event"]]
            assert await _ids(api, base + "/deliveries") == [logged["delivery"]]
            status, shown, _ = await api.call("GET", f"{base}/deliveries/{logged['delivery']}")
            assert status == 200 and len(shown["attempt_log"]) == 1, shown
            for event_id in (made["event"], logged["event"]):  # in Redis, in the log
                status, shown, _ = await api.call("GET", f"{base}/events/{event_id}")
                assert (status, shown["application"]) == (200, app_id), shown
        # The flat routes act on the default application: nothing of it but the operations
        # endpoint.
        assert await _ids(api, "/v1/endpoints") == [made["ops"]]
        for path in (
            f"/v1/endpoints/{made['every']}",
            f"/v1/applications/default/events/{made['event']}",
            f"/v1/applications/default/events/{logged['event']}",
            f"/v1/applications/default/deliveries/{logged['delivery']}",
        ):
            status, body, _ = await api.call("GET", path)
            assert status == 404, (path, body)
        for path in ("/v1/applications/default/events", "/v1/applications/default/deliveries"):
            assert await _ids(api, path) == []
        # An event sent by the flat route reaches none of the moved endpoints; by the
        # application's, both of the type.
        status, sent, _ = await api.call("POST", "/v1/events", json={"type": S3_TYPE, "data": {}})
        assert (status, sent["application"], sent["deliveries"]) == (202, DEFAULT_APP_ID, 0), sent
        status, sent, _ = await api.call(
            "POST", f"/v1/applications/{NAMED_UID}/events", json={"type": S3_TYPE, "data": {}}
        )
        assert (status, sent["application"], sent["deliveries"]) == (202, app_id, 2), sent


# Schema 4 -> 5: a store of applications as schema 4 wrote it (no hash tag in any name, ids
# with no mark: random characters where it stands now), by hand: made with today's helpers
# in one bucket (of ids whose mark is not 0, as an old id's characters mostly read), then
# given the names of the layout before buckets (tests/support/buckets.py legacy_layout).
OLD_UID, OLD_TYPE = "old-tenant", "s4.order"


async def _schema4_store(url: str, box: SecretBox) -> dict[str, str]:
    """An application with a uid, its endpoint, an event with an idempotency key whose
    delivery is pending (due, logged, counted), a wake-up's side list, a job and an API key;
    stamped 4. Returns the ids made, and the API key."""
    at = now_ms() - 60_000
    mark = uid_mark(OLD_UID)
    assert keys.uid_bucket(OLD_UID) != 0 and mark != 0
    client = async_client(url)
    try:
        scripts = Scripts(client)
        app_id = new_id("app", at, mark=mark)
        record = ApplicationRecord(app_id, "Old", OLD_UID, {}, None, at, at)
        assert await ApplicationStore(client, scripts).create(record) is (
            ApplicationOutcome.CREATED
        )
        endpoint_id = new_id("ep", at + 1, mark=mark)
        endpoint = EndpointRecord(
            id=endpoint_id, url="http://127.0.0.1:9/old", description="", event_types=[OLD_TYPE],
            disabled=False, created_ms=at + 1, updated_ms=at + 1, application=app_id,
            secrets=[SealedSecret(box.seal(generate_secret(), endpoint_id))],
        )  # fmt: skip
        await EndpointStore(client, scripts).save(endpoint, creating=True)
        claim = IdempotencyClaim("key_old", "order-7", "fp", 3600, "done", 0)
        accepted = await EventStore(client, scripts).accept(
            event_id=new_id("msg", at + 2, mark=mark), event_type=OLD_TYPE, body="{}",
            key_id="key_old", now_ms=at + 2, budget=3, grace_ms=1000, idempotency=claim,
            wakeup=None, backlog_max=1_000_000, app_id=app_id,
        )  # fmt: skip
        (delivery,) = accepted.delivery_ids
        await client.rpush(keys.wakeup_more(f"{accepted.event_id}.1"), delivery)
        job = await JobStore(client, 3600).create("retry", "{}", ["failed"], at + 3)
        api_key, presented = await ApiKeyStore(client, box).create("old", ["admin"], None, at)
    finally:
        await client.aclose()
    sync = sync_client(url)
    try:
        assert {keys.bucket_of_key(k) for k in sync.scan_iter(match="*{b*")} == {
            keys.uid_bucket(OLD_UID)
        }
        legacy_layout(sync)
        assert not [k for k in sync.scan_iter(match="*{*")]
        schema.stamp(sync, 4)
    finally:
        sync.close()
    return {
        "app": app_id, "endpoint": endpoint_id, "event": accepted.event_id,
        "delivery": delivery, "job": job.id, "api_key": api_key.id, "presented": presented,
    }  # fmt: skip


def _dump(url: str) -> list[tuple[bytes, bytes, int]]:
    """Every key, to put back as it was (``_restore``). Not decoded: DUMP's payloads are
    bytes."""
    binary = redis.Redis.from_url(url)
    try:
        return [
            (name, cast(bytes, binary.dump(name)), int(binary.pttl(name)))
            for name in binary.scan_iter(match="*", count=1000)
        ]
    finally:
        binary.close()


def _restore(url: str, dumped: list[tuple[bytes, bytes, int]]) -> None:
    binary = redis.Redis.from_url(url)
    try:
        binary.flushall()
        for name, value, ttl in dumped:
            binary.restore(name, max(ttl, 0), value)
    finally:
        binary.close()


async def _contents(url: str) -> dict[str, Any]:
    """Every key with its whole value (in no order: a store renamed in two runs holds the
    same keys, scanned otherwise)."""
    client = Redis.from_url(url)
    try:
        return await redis_contents(client, skip=(), match="*")
    finally:
        await client.aclose()


@pytest.fixture(autouse=True)
def epoch_reset() -> Iterator[None]:
    """migrate() called in-process (and schema.load_epoch) set this process's bucket epoch
    (ids.py): put back for the tests after, whose ids it would read otherwise."""
    yield
    set_epoch(0)


async def test_a_store_of_schema_4_moves_into_its_buckets_and_its_old_ids_still_work(
    fresh_valkey: EmbeddedValkey, log: sa.Engine
) -> None:
    box = SecretBox(generate_master_key())
    made = await _schema4_store(fresh_valkey.url, box)
    client = sync_client(fresh_valkey.url)
    try:
        outbox_before = client.xrange(keys.untagged(keys.outbox(0)))
        dumped = _dump(fresh_valkey.url)
        report = migrate(client, box, log)

        assert report.buckets is not None and report.buckets.uids == 1
        assert report.buckets.keys >= 20 and report.buckets.epoch_ms > 0
        assert client.get(keys.SCHEMA) == str(schema.CURRENT)
        assert int(client.get(keys.BUCKET_EPOCH) or 0) == report.buckets.epoch_ms
        assert schema.start_check(fresh_valkey.url) is None
        # Every key has its tag now: bucket 0's (all the store held), the uid's mapping in
        # its own bucket's, {jobs}, {apikeys}; but for the few that have none.
        untagged = {keys.SCHEMA, keys.BUCKET_EPOCH, keys.API_KEY_PEPPER}
        tags = {keys.tag_of(k) for k in client.scan_iter(match="*") if k not in untagged}
        assert tags == {"b0", f"b{keys.uid_bucket(OLD_UID)}", "jobs", "apikeys"}
        assert client.hgetall(keys.apps_uid(OLD_UID)) == {OLD_UID: made["app"]}
        assert not client.exists(keys.LEGACY_APPS_UID, keys.LEGACY_ENDPOINTS)
        # An old id holds no mark: made before the epoch, it reads as of bucket 0.
        for name in ("app", "endpoint", "event", "delivery"):
            assert keys.bucket_of(made[name]) == 0, name
        assert client.xrange(keys.outbox(0)) == outbox_before
        assert client.zrange(keys.due(0), 0, -1) == [made["delivery"]]
        assert client.lrange(keys.wakeup_more(f"{made['event']}.1"), 0, -1) == [made["delivery"]]
        after = await _contents(fresh_valkey.url)

        # Again: nothing changes (the epoch is the first run's).
        again = migrate(client, box, log)
        assert not again.changed and again.buckets is None
        assert await _contents(fresh_valkey.url) == after
        # A run cut short half-way through its renames runs again to the same end.
        _restore(fresh_valkey.url, dumped)
        client.set(keys.BUCKET_EPOCH, report.buckets.epoch_ms)
        names = sorted(str(n) for n in client.scan_iter(match=keys.PREFIX + "*"))
        for name in names[: len(names) // 2]:
            if (new := keys.tagged(name)) is not None:
                client.rename(name, new)
        rerun = migrate(client, box, log)
        assert rerun.buckets is not None and rerun.buckets.epoch_ms == report.buckets.epoch_ms
        assert await _contents(fresh_valkey.url) == after
    finally:
        client.close()

    # The store serves, its old ids as they were: by uid, by id, a lease and a record of
    # the pending delivery, a new event to the old endpoint, the idempotency key, the job
    # and the API key.
    store = async_client(fresh_valkey.url)
    try:
        scripts = Scripts(store)
        found = await ApplicationStore(store, scripts).resolve(OLD_UID)
        assert found is not None and found.id == made["app"]
        endpoint = await EndpointStore(store, scripts).get(made["endpoint"])
        assert endpoint is not None and endpoint.application == made["app"]
        deliveries = DeliveryStore(store, scripts)
        leased = await deliveries.lease([made["delivery"]], "tok", now_ms(), 30_000, 10)
        assert [j.endpoint_id for j in leased.jobs] == [made["endpoint"]]
        recorded = await deliveries.record(
            delivery_id=made["delivery"], token="tok", now_ms=now_ms(),
            attempt=Attempt(1, now_ms(), 5, 204, None, ""), outcome=AttemptOutcome.OK,
            delay_ms=None, health=HealthPolicy(3_600_000, 3),
        )  # fmt: skip
        assert recorded.status is RecordOutcome.SUCCEEDED
        events = EventStore(store, scripts)
        fresh = await events.accept(
            event_id=new_id("msg", mark=mark_of(made["app"])), event_type=OLD_TYPE, body="{}",
            key_id="key_old", now_ms=now_ms(), budget=3, grace_ms=1000, idempotency=None,
            wakeup=None, backlog_max=1_000_000, app_id=made["app"],
        )  # fmt: skip
        assert fresh.outcome is IngestOutcome.CREATED and fresh.fanout == 1
        assert keys.bucket_of(fresh.event_id) == 0
        repeat = await events.accept(
            event_id=new_id("msg", mark=0), event_type=OLD_TYPE, body="{}", key_id="key_old",
            now_ms=now_ms(), budget=3, grace_ms=1000,
            idempotency=IdempotencyClaim("key_old", "order-7", "fp", 3600, "done", 0),
            wakeup=None, backlog_max=1_000_000, app_id=made["app"],
        )  # fmt: skip
        assert (repeat.outcome, repeat.event_id) == (IngestOutcome.REPLAY, made["event"])
        job = await JobStore(store, 3600).get(made["job"])
        assert job is not None and job.kind == "retry"
        verified = await ApiKeyStore(store, box).verify(made["presented"])
        assert verified is not None and verified.id == made["api_key"]
    finally:
        await store.aclose()


# Today's release (tests/support/release_data.py): its tree once a session, and the data
# dirs it writes, once each; a test migrates a copy.
@pytest.fixture(scope="session")
def release_code(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return release_tree(tmp_path_factory.mktemp("release") / "tree")


@pytest.fixture(scope="session")
def release(release_code: Path, tmp_path_factory: pytest.TempPathFactory) -> ReleaseData:
    return write(release_code, tmp_path_factory.mktemp("release-small") / "data", "small")


@pytest.fixture(scope="session")
def large_release(release_code: Path, tmp_path_factory: pytest.TempPathFactory) -> ReleaseData:
    return write(release_code, tmp_path_factory.mktemp("release-large") / "data", "large")


def _release_env(
    data: ReleaseData, valkey: EmbeddedValkey, log: Mapping[str, str]
) -> dict[str, str]:
    return service_env(
        valkey.url,
        {"WEBHOOK_DATA_DIR": str(data.directory), "WEBHOOK_MASTER_KEY": data.master_key, **log},
    )


def _log_rows(env: Mapping[str, str]) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the log, table by table, in key order."""
    engine = sync_engine(settings_of(env))
    try:
        with engine.connect() as conn:
            return {
                table.name: sorted(tuple(row) for row in conn.execute(sa.select(table)))
                for table in (tables.events, tables.deliveries, tables.attempts)
            }
    finally:
        engine.dispose()


def _expected_log(manifest: dict[str, Any]) -> dict[str, Any]:
    """The log rows the release's own readers say its store held (attempts as their JSON)."""
    idempotency = manifest["idempotency"]
    events = {
        event_id: (
            e["type"], e["key_id"], idempotency.get(event_id), e["body"],
            None if e["expunged"] is None else int(e["expunged"]),
        )
        for event_id, e in manifest["events"].items()
    }  # fmt: skip
    deliveries = {
        d_id: (
            d["event_id"], d["endpoint_id"], d["event_type"], d["status"], d["attempts"],
            d["updated_ms"], d["next_at_ms"], d["last_code"], d["last_error"], d["last_class"],
            0,
        )
        for d_id, d in manifest["deliveries"].items()
    }  # fmt: skip
    attempts = {
        (d_id, Attempt.from_json(a).number): Attempt.from_json(a).to_json()
        for d_id, d in manifest["deliveries"].items()
        for a in d["attempt_log"]
    }
    return {"events": events, "deliveries": deliveries, "attempts": attempts}


def _as_expected(rows: dict[str, list[tuple[Any, ...]]]) -> dict[str, Any]:
    """Log rows in the shape of ``_expected_log``."""
    return {
        "events": {r[0]: (r[2], r[3], r[4], r[5], r[6]) for r in rows["events"]},
        "deliveries": {r[0]: (*r[2:12], r[12]) for r in rows["deliveries"]},
        "attempts": {
            (r[0], r[1]): Attempt(r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8]).to_json()
            for r in rows["attempts"]
        },
    }


async def _store(url: str) -> dict[str, Any]:
    client = Redis.from_url(url, decode_responses=True)
    try:
        return await redis_contents(client, skip=())
    finally:
        await client.aclose()


@pytest.mark.parametrize("backend", LOG_BACKENDS)
async def test_a_release_data_dir_moves_into_the_log_and_its_pending_work_is_delivered(
    release: ReleaseData,
    backend: str,
    request: pytest.FixtureRequest,
    receiver: Receiver,
    tmp_path: Path,
) -> None:
    data = release.copy(tmp_path / "data")
    manifest = data.manifest
    valkey = start_valkey(data.directory / "valkey")
    stack = Stack(tmp_path, valkey, _release_env(data, valkey, log_env(request, backend)))
    env = stack.env
    try:
        before = await _store(valkey.url)
        assert any(":idx:" in k for k in before)
        assert keys.untagged(keys.SCHEMA2_RETENTION_CURSOR) in before  # no bucket yet
        assert before[keys.SCHEMA] == ("string", "2")
        status, out = run(["api"], {**env, "WEBHOOK_PORT": str(free_port())})
        assert status != 0 and "schema 2; run `webhook-service migrate`" in out, out

        status, out = run(["migrate"], env)
        assert status == 0, out
        # As every process does at its start: the release's ids read as of bucket 0 now.
        loaded = sync_client(valkey.url)
        try:
            assert schema.load_epoch(loaded) > 0
        finally:
            loaded.close()
        lines = out.splitlines()
        assert "gave 1 endpoints made before them a sequence number" in lines, out
        assert (
            f"moved to the log: {len(manifest['events'])} events, "
            f"{len(manifest['deliveries'])} deliveries, 10 attempts; 2 pending deliveries "
            "(of 1 events) stay in Redis, their attempts in the log only"
        ) in lines, out
        assert f"store is at schema {schema.CURRENT}" in lines, out
        moved = [line for line in lines if line.startswith("moved into the default application")]
        assert moved == [
            f"moved into the default application ({DEFAULT_APP_ID}): "
            f"{len(manifest['endpoints'])} endpoints, 1 events, "
            f"{len(manifest['idempotency'])} idempotency records, 0 log records not yet shipped"
        ], out

        # The log holds the history as the release read it, every delivery at log_seq 0.
        rows = _log_rows(env)
        assert _as_expected(rows) == _expected_log(manifest)
        assert len(rows["attempts"]) == 10

        # Redis holds the work in flight, and nothing of schema 2's history.
        after = await _store(valkey.url)
        pending = manifest["pending"]
        deliveries = sorted(k for k in after if k.startswith(keys.delivery("")))
        assert deliveries == sorted(keys.delivery(d) for d in pending)
        assert not [k for k in after if ":idx:" in k or k.endswith(":attempts")]
        assert keys.SCHEMA2_RETENTION_CURSOR not in after
        for key in deliveries:
            assert not [f for f in after[key][1] if keys.schema2_attempt_field(f)]
        (pending_event,) = {manifest["deliveries"][d]["event_id"] for d in pending}
        assert [k for k in after if k.startswith(keys.event(""))] == [keys.event(pending_event)]
        assert after[keys.event(pending_event)][1]["live"] == "2"
        assert after[keys.SCHEMA] == ("string", str(schema.CURRENT))
        assert after[keys.event(pending_event)][1]["app"] == DEFAULT_APP_ID
        legacy = manifest["endpoints"]["legacy"]["id"]
        assert after[keys.endpoint(legacy)][1]["seq"]
        seqs = after[keys.endpoint_seqs(0)][1]
        assert {delivery_tail(d) for d in manifest["deliveries"]} <= set(seqs)
        for d_id, d in manifest["deliveries"].items():
            assert seqs[delivery_tail(d_id)] == d["endpoint_id"]
        for idem in manifest["idempotency"].values():
            assert after[keys.idempotency(DEFAULT_APP_ID, "key_rel", idem)][1]["fanout"] == "3"
        assert not [k for k in after if k.startswith(keys.idempotency_records()[:-1] + "key_")]
        for made in manifest["endpoints"].values():
            assert after[keys.endpoint(made["id"])][1]["app"] == DEFAULT_APP_ID
        backlogs = {k: v for k, v in after.items() if k.startswith(keys.backlog(""))}
        assert backlogs == {
            keys.backlog(manifest["endpoints"][name]["id"]): ("string", "1")
            for name in ("pending", "legacy")
        }

        # Run again: nothing changes.
        status, out = run(["migrate"], env)
        assert status == 0, out
        assert out.strip() == (
            f"nothing to migrate: the store is at schema {schema.CURRENT} already"
        ), out
        assert _log_rows(env) == rows
        assert await _store(valkey.url) == after

        # A real worker delivers the pending work; its attempts follow the migrated ones.
        stack.start("worker", "worker0")
        stack.start("scheduler")
        async with serve_api(settings_of(env)) as (_, api):
            for name in ("pending", "legacy"):
                made = manifest["endpoints"][name]
                receiver.secrets[name] = [made["secret"]]
                status, body, _ = await api.call(
                    "PATCH", f"/v1/endpoints/{made['id']}", json={"url": receiver.url(name)}
                )
                assert status == 200, body

            async def delivered() -> bool:
                got = {
                    name
                    for name in ("pending", "legacy")
                    for r in receiver.for_endpoint(name)
                    if r.webhook_id == pending_event and r.verified
                }
                return got == {"pending", "legacy"}

            await wait_for(delivered, timeout=60)

        def logged() -> dict[str, Any]:
            now = _log_rows(env)
            return {
                "deliveries": {
                    r[0]: (r[5], r[6], r[12] > 0) for r in now["deliveries"] if r[0] in pending
                },
                "attempts": sorted((r[0], r[1], r[2]) for r in now["attempts"] if r[0] in pending),
            }

        async def shipped() -> bool:
            return all(v == ("succeeded", 2, True) for v in logged()["deliveries"].values())

        await wait_for(shipped, timeout=30)
        client = sync_client(valkey.url)
        try:
            assert [int(client.get(name) or 0) for name in backlogs] == [0, 0]
        finally:
            client.close()
        attempts = logged()["attempts"]
        assert [(d, n) for d, n, _ in attempts] == [(d, n) for d in sorted(pending) for n in (1, 2)]
        for first, second in zip(attempts[::2], attempts[1::2], strict=True):
            assert second[2] > first[2]
    finally:
        stack.stop()


@pytest.mark.timeout(900)
async def test_a_migration_killed_half_way_and_run_again_ends_as_one_left_alone(
    large_release: ReleaseData, tmp_path: Path
) -> None:
    runs = {}
    for name in ("whole", "killed"):
        data = large_release.copy(tmp_path / name)
        valkey = start_valkey(data.directory / "valkey")
        env = _release_env(data, valkey, {})
        try:
            if name == "killed":
                _kill_half_way(env, data.directory / SQLITE_FILE, len(data.manifest["deliveries"]))
                client = sync_client(valkey.url)
                try:
                    assert client.get(keys.SCHEMA) == "2"
                finally:
                    client.close()
            status, out = run(["migrate"], env, timeout=600)
            assert status == 0, out
            stored_now = await _store(valkey.url)
            # When each run began: the one thing two runs over one store write differently.
            assert stored_now.pop(keys.BUCKET_EPOCH)[0] == "string"
            runs[name] = (_log_rows(env), stored_now, out)
        finally:
            valkey.stop()
    whole, killed = runs["whole"], runs["killed"]
    assert f"{len(large_release.manifest['deliveries'])} deliveries" in whole[2]
    assert f"{len(large_release.manifest['deliveries'])} deliveries" not in killed[2]
    assert killed[0] == whole[0]
    assert _as_expected(whole[0]) == _expected_log(large_release.manifest)
    assert killed[1] == whole[1]


def _kill_half_way(env: Mapping[str, str], log_file: Path, total: int) -> None:
    """``webhook-service migrate``, SIGKILLed once the log holds a third of the deliveries
    (and not all of them: then it was not cut short)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "webhook_service", "migrate"],
        env=dict(env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        while (count := _deliveries_in(log_file)) < total // 3:
            assert process.poll() is None, "migrate ended before it was killed"
            assert time.monotonic() < deadline, "the log never filled"
            time.sleep(0.01)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert count < total, "killed only once it was done"


def _deliveries_in(log_file: Path) -> int:
    if not log_file.exists():
        return 0
    conn = sqlite3.connect(f"file:{log_file}?mode=ro", uri=True, timeout=5)
    try:
        return int(conn.execute("SELECT count(*) FROM deliveries").fetchone()[0])
    except sqlite3.OperationalError:
        return 0  # the migrations have not made the table yet
    finally:
        conn.close()
