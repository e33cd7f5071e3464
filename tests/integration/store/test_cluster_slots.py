"""Keys ready for a cluster (issue 16 item 9, DESIGN.md "Cluster-ready keys"): the scripts,
transactions and reads of the hot path run on a real 3-primary Valkey Cluster, formed here
from the Valkey binary the tests use (tests/support/cluster.py), through redis-py's cluster
clients, and none crosses a slot.

Valkey refuses a script's key of another slot only when its node does not serve that slot
(checked below: an undeclared key of a slot on the same node is allowed). So the slots are
laid out to catch every crossing that matters: the default application's bucket (the
operational events, the default application) has a node of its own, holding that one slot,
and so has tenant A's bucket; the third node serves every other slot (tenant B's bucket,
the other buckets, the keys of no bucket). A script of either of the first two buckets that
touched any other key would fail here; redis-py refuses a call whose KEYS are of two slots,
and Valkey a MULTI's. The service itself still runs on one Redis: running it whole on a
cluster (the broker apart, wake-ups after the step) is issue 20's.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import redis
import sqlalchemy as sa
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.cluster import RedisCluster as SyncRedisCluster
from redis.crc import key_slot

from tests.support.cluster import Cluster, apart, running
from tests.support.stack import settings_of
from webhook_service.crypto import SecretBox, generate_master_key
from webhook_service.history import tables
from webhook_service.history.database import sync_engine, upgrade
from webhook_service.history.shipper import Shipper, outbox_length
from webhook_service.ids import mark_of, new_id
from webhook_service.store import keys, ops, telemetry
from webhook_service.store.apikeys import ApiKeyStore
from webhook_service.store.app_deletion import AppEndArgs, AppEndOutcome, ApplicationDeletion
from webhook_service.store.applications import (
    DEFAULT_APP_ID,
    ApplicationOutcome,
    ApplicationRecord,
    ApplicationStore,
    NewApplication,
    new_app_id,
)
from webhook_service.store.counts import AttemptCounts
from webhook_service.store.deliveries import (
    Attempt,
    AttemptOutcome,
    DeliveryStore,
    HealthPolicy,
    NextLease,
    RecordOutcome,
    RetryOutcome,
)
from webhook_service.store.due import claim_due, count_due
from webhook_service.store.endpoints import EndpointRecord, EndpointStore, SealedSecret
from webhook_service.store.events import (
    CancelOutcome,
    EventStore,
    ExpungeOutcome,
    IdempotencyClaim,
    IngestOutcome,
    ReplayOutcome,
    ScheduleCancelled,
)
from webhook_service.store.jobs import JobStore
from webhook_service.store.ratelimit import RateLimiter
from webhook_service.store.release import release
from webhook_service.store.scripts import Scripts
from webhook_service.timeutil import now_ms

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

TYPE = "cluster.order"
UID_A, UID_B = "cluster-a", "cluster-b"
BUCKET_A, BUCKET_B = keys.uid_bucket(UID_A), keys.uid_bucket(UID_B)
HEALTH = HealthPolicy(disable_after_ms=3_600_000, ops_budget=3)
LEASE_MS = 30_000


def _as_redis(client: RedisCluster) -> Redis:
    """The stores take a Redis client; a cluster client answers the same commands (issue 20
    types them for both)."""
    return cast(Redis, client)


def _as_sync(client: SyncRedisCluster) -> redis.Redis:
    return cast(redis.Redis, client)


def _node_of(client: SyncRedisCluster, key: str) -> str:
    """The node serving the key's slot (redis-py leaves get_node_from_key untyped)."""
    return str(client.get_node_from_key(key).name)  # type: ignore[no-untyped-call]


def _slot(bucket: int) -> int:
    return key_slot(keys.due(bucket).encode())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    assert len({keys.DEFAULT_BUCKET, BUCKET_A, BUCKET_B}) == 3
    layout = apart(_slot(keys.DEFAULT_BUCKET), _slot(BUCKET_A))
    with running(tmp_path_factory.mktemp("cluster"), layout) as formed:
        yield formed


@pytest.fixture
async def client(cluster: Cluster) -> AsyncIterator[RedisCluster]:
    node = cluster.seed
    rc = RedisCluster(
        host="127.0.0.1", port=node.port, password=cluster.password, decode_responses=True
    )
    await rc.initialize()
    yield rc
    await rc.aclose()


@pytest.fixture
def sync_client(cluster: Cluster) -> Iterator[SyncRedisCluster]:
    node = cluster.seed
    rc = SyncRedisCluster(
        host="127.0.0.1", port=node.port, password=cluster.password, decode_responses=True
    )
    yield rc
    rc.close()


def test_the_layout_gives_the_two_buckets_a_node_each(sync_client: SyncRedisCluster) -> None:
    nodes = {
        bucket: _node_of(sync_client, keys.due(bucket))
        for bucket in (keys.DEFAULT_BUCKET, BUCKET_A, BUCKET_B)
    }
    assert len(set(nodes.values())) == 3


def test_valkey_refuses_a_scripts_key_of_a_slot_its_node_does_not_serve(
    sync_client: SyncRedisCluster,
) -> None:
    """What the layout relies on, as Valkey 9.1 does it: an undeclared key of the script's
    own slot is allowed, and so (on a connection that met no refusal before) is one of
    another slot its node serves, so a test on an even layout could miss a crossing; one of
    a slot another node serves is refused. (One command naming keys of two slots is
    refused too, and then Valkey 9.1 refuses every later script's keys on that node, its
    declared ones as well, whatever the connection: not tried here, where the node serves
    the test after.)"""
    read = "return redis.call('GET', ARGV[1])"
    own = keys.due(BUCKET_A)
    assert sync_client.eval(read, 1, own, keys.app(new_id("app", mark=BUCKET_A))) is None
    b_node = _node_of(sync_client, keys.due(BUCKET_B))
    neighbour = next(
        b
        for b in keys.all_buckets()
        if b != BUCKET_B and _node_of(sync_client, keys.due(b)) == b_node
    )
    assert sync_client.eval(read, 1, keys.due(BUCKET_B), keys.due(neighbour)) is None
    for elsewhere in (keys.due(keys.DEFAULT_BUCKET), keys.due(BUCKET_B), keys.SCHEMA):
        with pytest.raises(redis.ResponseError, match="non local key"):
            sync_client.eval(read, 1, own, elsewhere)
    # Two declared keys of two slots: refused before it is sent.
    with pytest.raises(redis.RedisClusterException, match="same key slot"):
        sync_client.eval("return 1", 2, own, keys.due(BUCKET_B))


def _endpoint(app_id: str, name: str, at: int, *, operations: bool = False) -> EndpointRecord:
    endpoint_id = new_id("ep", at, mark=mark_of(app_id))
    return EndpointRecord(
        id=endpoint_id, url=f"http://127.0.0.1:9/{name}", description=name,
        event_types=[] if operations else [TYPE], disabled=False, created_ms=at,
        updated_ms=at, secrets=[SealedSecret("v1:sealed")], operations=operations,
        application=app_id,
    )  # fmt: skip


async def _send(
    events: EventStore,
    app_id: str,
    at: int,
    *,
    budget: int = 3,
    idempotency: IdempotencyClaim | None = None,
    create_app: NewApplication | None = None,
) -> list[str]:
    """One event to the application (in its bucket), its inline wake-up off: the Celery
    queue it would push to is of no bucket, and on a cluster the broker is apart."""
    accepted = await events.accept(
        event_id=new_id("msg", at, mark=mark_of(app_id)), event_type=TYPE, body='{"n":1}',
        key_id="key_c", now_ms=at, budget=budget, grace_ms=1000, wakeup=None,
        backlog_max=1_000_000, app_id=app_id, idempotency=idempotency, create_app=create_app,
    )  # fmt: skip
    assert accepted.outcome is IngestOutcome.CREATED, accepted
    return list(accepted.delivery_ids)


async def test_the_hot_path_runs_on_a_cluster_and_never_crosses_a_slot(
    client: RedisCluster, sync_client: SyncRedisCluster, tmp_path: Path
) -> None:
    store, sync_store = _as_redis(client), _as_sync(sync_client)
    scripts, sync_scripts = Scripts(store), Scripts(sync_store)
    apps, endpoints = ApplicationStore(store, scripts), EndpointStore(store, scripts)
    events, deliveries = EventStore(store, scripts), DeliveryStore(store, scripts)
    at = now_ms() - 10_000

    # Tenant A is created by the ingest of its first event (with its uid: one step, in its
    # uid's bucket); tenant B by app_save; the default application by its first endpoint,
    # the operator's, which gets our operational events.
    app_a = new_app_id(at, UID_A)
    claim = IdempotencyClaim("key_c", "order-1", "fp", 600, "done", 0)
    assert await _send(
        events, app_a, at, idempotency=claim, create_app=NewApplication(app_a, UID_A, "A")
    ) == []  # fmt: skip
    found = await apps.resolve(UID_A)
    assert found is not None and found.id == app_a and keys.bucket_of(app_a) == BUCKET_A
    app_b = new_app_id(at, UID_B)
    record_b = ApplicationRecord(app_b, "B", UID_B, {}, None, at, at)
    assert await apps.create(record_b) is ApplicationOutcome.CREATED
    operator = _endpoint(DEFAULT_APP_ID, "ops", at + 1, operations=True)
    ep_a, ep_b = _endpoint(app_a, "a", at + 2), _endpoint(app_b, "b", at + 3)
    for endpoint in (operator, ep_a, ep_b):
        await endpoints.save(endpoint, creating=True)
    assert await endpoints.set_disabled(ep_b.id, False, at + 4)

    # Ingest: each tenant's event reaches its own endpoint alone; a repeated key answers
    # the first event; a throttled tenant (A's own limiter) is refused in its bucket.
    (first_a,) = await _send(events, app_a, at + 5)
    (retried_a,) = await _send(events, app_a, at + 6)
    (exhausted_b,) = await _send(events, app_b, at + 7, budget=1)
    repeat = await events.accept(
        event_id=new_id("msg", at + 8, mark=mark_of(app_a)), event_type=TYPE, body="{}",
        key_id="key_c", now_ms=at + 8, budget=3, grace_ms=1000, idempotency=claim,
        wakeup=None, backlog_max=1_000_000, app_id=app_a,
    )  # fmt: skip
    assert repeat.outcome is IngestOutcome.REPLAY

    # Lease: one call for ids of two buckets makes one script call a bucket.
    now = at + 100
    leased = await deliveries.lease([first_a, retried_a, exhausted_b], "tok", now, LEASE_MS, 10)
    assert sorted(j.delivery_id for j in leased.jobs) == sorted([first_a, retried_a, exhausted_b])
    assert {j.endpoint_id for j in leased.jobs} == {ep_a.id, ep_b.id}

    # Record: a success (leasing what its slot frees, none here), a failure to try again,
    # and an exhausted delivery of B's bucket, which asks for delivery.exhausted there.
    async def record(
        delivery_id: str, outcome: AttemptOutcome, code: int, delay: int | None
    ) -> Any:
        return await deliveries.record(
            delivery_id=delivery_id, token="tok", now_ms=now + 1,
            attempt=Attempt(1, now, 5, code, None, "x"), outcome=outcome, delay_ms=delay,
            health=HEALTH, next_lease=NextLease("tok2", LEASE_MS, 10),
        )  # fmt: skip

    assert (await record(first_a, AttemptOutcome.OK, 200, None)).status is (RecordOutcome.SUCCEEDED)
    assert (await record(retried_a, AttemptOutcome.FAIL, 500, 0)).status is RecordOutcome.PENDING
    assert (await record(exhausted_b, AttemptOutcome.FAIL, 500, None)).status is (
        RecordOutcome.FAILED
    )
    (request,) = await client.lrange(keys.ops_requests(BUCKET_B), 0, -1)
    asked = json.loads(request)
    assert asked["type"] == "delivery.exhausted" and keys.bucket_of(asked["id"]) == 0

    # The step that moves it: made in the default bucket, for the operator, once.
    assert ops.forward(sync_scripts) == 1
    assert ops.forward(sync_scripts) == 0
    ops_event = await events.get(asked["id"])
    assert ops_event is not None and ops_event.application is None
    (to_operator,) = ops_event.delivery_ids
    assert (await deliveries.get(to_operator)).endpoint_id == operator.id  # type: ignore[union-attr]

    # Counts: one MULTI a bucket.
    counts = AttemptCounts()
    for endpoint_id, status, class_ in (
        (ep_a.id, RecordOutcome.SUCCEEDED, "2xx"), (ep_b.id, RecordOutcome.FAILED, "5xx"),
    ):  # fmt: skip
        counts.note(
            endpoint_id=endpoint_id, status_class=class_, status=status, duration_ms=5,
            latency_ms=9, code=200, error=None, now_ms=now,
        )  # fmt: skip
    await deliveries.add_counts(counts)
    assert not counts
    snapshot = await telemetry.snapshot(store, now)
    assert int(snapshot.counters["attempts:2xx"]) == 1
    assert int(snapshot.counters["attempts:5xx"]) == 1
    assert int(snapshot.counters["events_accepted"]) == 4  # ingest's (not the ops event)

    # An admin's retry of two buckets' finished deliveries, and a replay and an expunge.
    retried = await deliveries.retry([first_a, exhausted_b], now + 2, 1000)
    assert retried.outcomes == [RetryOutcome.OK, RetryOutcome.OK]
    first_event = (await deliveries.get(first_a)).event_id  # type: ignore[union-attr]
    replayed = await events.replay(first_event, None, now + 3, 3, 1000, sender=None)
    assert replayed.outcome is ReplayOutcome.OK and len(replayed.delivery_ids) == 1
    b_event = (await deliveries.get(exhausted_b)).event_id  # type: ignore[union-attr]
    expunged = await events.expunge_payload(b_event, now + 4, sender=None)
    assert expunged.outcome is ExpungeOutcome.EXPUNGED
    # A scheduled event of B's (due a day on: none to wake now), its schedule cancelled.
    scheduled_id = new_id("msg", now + 5, mark=mark_of(app_b))
    scheduled = await events.accept(
        event_id=scheduled_id, event_type=TYPE, body="{}", key_id="key_c", now_ms=now + 5,
        budget=3, grace_ms=1000, idempotency=None, wakeup=None, backlog_max=1_000_000,
        app_id=app_b, deliver_at_ms=now + 86_400_000,
    )  # fmt: skip
    assert scheduled.outcome is IngestOutcome.CREATED and scheduled.fanout == 1
    cancelled = await events.cancel_schedule(scheduled_id, now + 6, sender=None)
    assert cancelled == ScheduleCancelled(CancelOutcome.CANCELLED, 1)

    # claim_due over every bucket: what is due in each, its limit shared out.
    later = now + 10 * LEASE_MS
    due_before = await count_due(store, later)
    claimed = await claim_due(scripts, later, 100, 5000)
    assert len(claimed) == due_before > 3
    assert {keys.bucket_of(i) for i in claimed.ids} == {0, BUCKET_A, BUCKET_B}

    # The shipper reads and trims every bucket's outbox, then names what finished for
    # release, a bucket a call; release then lets it go.
    engine = sync_engine(settings_of({"WEBHOOK_DATA_DIR": str(tmp_path)}))
    upgrade(engine)
    try:
        await _ship_and_the_rest(
            store, sync_store, engine, tmp_path, app_a, app_b, ep_b, to_operator, later
        )
    finally:
        engine.dispose()


async def _ship_and_the_rest(
    client: Redis,
    sync_client: redis.Redis,
    engine: sa.Engine,
    tmp_path: Path,
    app_a: str,
    app_b: str,
    ep_b: EndpointRecord,
    to_operator: str,
    later: int,
) -> None:
    scripts, sync_scripts = Scripts(client), Scripts(sync_client)
    apps, endpoints = ApplicationStore(client, scripts), EndpointStore(client, scripts)
    deliveries = DeliveryStore(client, scripts)
    now = later
    shipper = Shipper(sync_client, engine, settings_of({"WEBHOOK_DATA_DIR": str(tmp_path)}))
    waiting = outbox_length(sync_client)
    assert waiting > 10
    assert shipper.ship_batch() == waiting
    assert outbox_length(sync_client) == 0
    with engine.connect() as conn:
        logged = {r.application for r in conn.execute(sa.select(tables.events))}
    assert logged == {app_a, app_b, None}
    # Finish the ops delivery, then let what finished go, a hot window on.
    leased = await deliveries.lease([to_operator], "tok3", later + 1, LEASE_MS, 10)
    assert leased.jobs
    done = await deliveries.record(
        delivery_id=to_operator, token="tok3", now_ms=later + 2,
        attempt=Attempt(1, later + 1, 5, 200, None, ""), outcome=AttemptOutcome.OK,
        delay_ms=None, health=HEALTH,
    )  # fmt: skip
    assert done.status is RecordOutcome.SUCCEEDED
    assert shipper.ship_batch() > 0
    released = release(sync_scripts, later + 10 * 60_000, 0, 100)
    assert released.deliveries >= 1

    # Applications: a uid changed to one of another bucket (claimed there, then the old one
    # let go of), and B deleted: its record and uid, then its pending deliveries ended.
    moved = ApplicationRecord(app_a, "A", "cluster-renamed", {}, None, now - 10_000, now)
    assert keys.uid_bucket("cluster-renamed") not in (BUCKET_A, keys.uid_bucket(UID_A))
    assert await apps.update(moved) is ApplicationOutcome.UPDATED
    assert (await apps.resolve("cluster-renamed")).id == app_a  # type: ignore[union-attr]
    assert await apps.resolve(UID_A) is None and await apps.id_of_uid(UID_A) is None
    listed, _ = await apps.page(10, None)
    assert {a.id for a in listed} == {app_a, app_b, DEFAULT_APP_ID}
    assert await apps.delete(app_b)
    deletion = ApplicationDeletion(client, scripts)
    ended = await deletion.end_pending(AppEndArgs(app_b, "0", 500, later + 3))
    assert ended.outcome is AppEndOutcome.SCANNED and ended.ended == 1
    mark = await deletion.outbox_mark()
    assert not await deletion.shipped(mark)
    assert shipper.ship_batch() == 1
    assert await deletion.shipped(mark)
    assert await endpoints.delete(ep_b.id)

    # What stands outside every bucket: jobs ({jobs}), API keys ({apikeys}), a generic
    # limiter (one key).
    jobs = JobStore(client, 60)
    job = await jobs.create("retry", "{}", ["failed"], now)
    assert (await jobs.get(job.id)) is not None
    api_keys = ApiKeyStore(client, SecretBox(generate_master_key()))
    made, presented = await api_keys.create("c", ["admin"], None, now)
    assert (await api_keys.verify(presented)).id == made.id  # type: ignore[union-attr]
    assert await api_keys.delete(made.id)
    assert await RateLimiter(scripts).acquire("apikey:cluster", 10.0, 5) == 0.0
