"""ops_emit.lua through store/ops.py forward (OpsEmitArgs, OpsEmitted), on a real Valkey: an
operational event that a record step of another application's bucket caused is asked for
there (common.lua emit_ops), made in the default application's bucket, where the operations
endpoints are, on the next forward, once however often it is handed over, and its request
dropped; one caused in the default bucket is made at once, as before buckets."""

from __future__ import annotations

import json

import pytest
import redis
from redis.asyncio import Redis

from tests.integration.store.tenants import app_endpoint, new_app
from tests.support import buckets
from webhook_service.ids import mark_of, new_id
from webhook_service.store import keys, ops
from webhook_service.store.deliveries import (
    Attempt,
    AttemptOutcome,
    DeliveryStore,
    HealthPolicy,
    RecordOutcome,
)
from webhook_service.store.endpoints import EndpointRecord, EndpointStore
from webhook_service.store.events import EventStore
from webhook_service.store.ops import OpsEmitArgs, OpsEmitted
from webhook_service.store.scripts import Scripts

pytestmark = pytest.mark.integration

NOW = 1_800_000_000_000
TYPE = "script.ops"
HEALTH = HealthPolicy(disable_after_ms=3_600_000, ops_budget=3)
TENANT_UID = "ops-tenant"  # of a bucket but the default one's


def test_the_args_are_the_requests_in_the_default_bucket() -> None:
    args = OpsEmitArgs(['{"id":"msg_1"}'])
    assert args.argv() == ['{"id":"msg_1"}']
    assert args.keys() == [keys.sub_ops(keys.DEFAULT_BUCKET)]
    assert OpsEmitted("made_before") is OpsEmitted.MADE_BEFORE


async def _operator(client: Redis) -> str:
    """The operator's operations endpoint, in the default application."""
    at = NOW - 50
    record = EndpointRecord(
        id=new_id("ep", at), url="http://127.0.0.1:9/ops", description="", event_types=[],
        disabled=False, created_ms=at, updated_ms=at, operations=True,
    )  # fmt: skip
    await EndpointStore(client, Scripts(client)).save(record, creating=True)
    return record.id


async def _exhausted(client: Redis, app_id: str) -> str:
    """One delivery of the application's, failed for good: delivery.exhausted is caused."""
    scripts = Scripts(client)
    await app_endpoint(scripts, app_id, [TYPE], NOW - 40)
    accepted = await EventStore(client, scripts).accept(
        event_id=new_id("msg", NOW, mark=mark_of(app_id)), event_type=TYPE, body="{}",
        key_id="key_1", now_ms=NOW, budget=1, grace_ms=1000, idempotency=None, wakeup=None,
        backlog_max=1_000_000, app_id=app_id,
    )  # fmt: skip
    (delivery_id,) = accepted.delivery_ids
    store = DeliveryStore(client, scripts)
    assert (await store.lease([delivery_id], "tok", NOW + 1, 30_000, 10)).jobs
    recorded = await store.record(
        delivery_id=delivery_id, token="tok", now_ms=NOW + 2,
        attempt=Attempt(1, NOW + 1, 5, 500, None, ""), outcome=AttemptOutcome.FAIL,
        delay_ms=None, health=HEALTH,
    )  # fmt: skip
    assert recorded.status is RecordOutcome.FAILED
    return delivery_id


async def _ops_events(client: Redis) -> list[tuple[str, dict[str, object]]]:
    """Every operational event the outboxes hold: its id and body."""
    made = []
    for _, fields in await buckets.outbox(client):
        if keys.OutboxField.EVENT in fields:
            record = json.loads(fields[keys.OutboxField.EVENT])
            if record["type"] != TYPE:
                made.append((record["id"], json.loads(fields[keys.OutboxField.BODY])))
    return made


async def test_another_buckets_failure_asks_and_the_default_bucket_makes_it_once(
    client: Redis, sync_redis: redis.Redis
) -> None:
    operator = await _operator(client)
    app_id = await new_app(client, NOW - 60, uid=TENANT_UID)
    bucket = keys.bucket_of(app_id)
    assert bucket != keys.DEFAULT_BUCKET
    delivery_id = await _exhausted(client, app_id)

    # Asked for in the failing delivery's bucket: nothing of it in the default one yet.
    (request,) = await client.lrange(keys.ops_requests(bucket), 0, -1)
    asked = json.loads(request)
    assert (asked["type"], asked["t"], asked["budget"]) == ("delivery.exhausted", NOW + 2, 3)
    assert keys.bucket_of(asked["id"]) == keys.DEFAULT_BUCKET
    assert await _ops_events(client) == []
    assert not await client.exists(keys.event(asked["id"]))

    assert ops.forward(Scripts(sync_redis)) == 1

    ((event_id, body),) = await _ops_events(client)
    assert event_id == asked["id"]
    assert body["type"] == "delivery.exhausted"
    assert body["data"]["delivery_id"] == delivery_id  # type: ignore[index]
    event = await client.hgetall(keys.event(event_id))
    assert (event["app"], event["key"], event["type"]) == ("", "system", "delivery.exhausted")
    # Its delivery is the operator's, due at once, in the default bucket.
    (to_operator,) = [d for d in await buckets.due(client) if d.startswith("dlv_" + event_id[4:])]
    assert await buckets.endpoint_of(client, to_operator) == operator
    assert keys.bucket_of(to_operator) == keys.DEFAULT_BUCKET
    assert not await client.exists(keys.ops_requests(bucket))
    assert await client.exists(keys.ops_made(event_id))

    # Handed over again (a forwarder died before dropping it): made once all the same.
    await client.rpush(keys.ops_requests(bucket), str(request))
    assert ops.forward(Scripts(sync_redis)) == 0
    assert len(await _ops_events(client)) == 1
    assert not await client.exists(keys.ops_requests(bucket))
    args = OpsEmitArgs([str(request)])
    assert Scripts(sync_redis).run_sync("ops_emit", args.keys(), args.argv()) == ["made_before"]


async def test_the_default_buckets_failure_makes_its_event_at_once(client: Redis) -> None:
    operator = await _operator(client)
    delivery_id = await _exhausted(client, "app_default")

    ((event_id, body),) = await _ops_events(client)
    assert body["data"]["delivery_id"] == delivery_id  # type: ignore[index]
    assert not await client.exists(keys.ops_requests(keys.DEFAULT_BUCKET))
    (to_operator,) = [d for d in await buckets.due(client) if d.startswith("dlv_" + event_id[4:])]
    assert await buckets.endpoint_of(client, to_operator) == operator


async def test_ops_emit_runs_in_the_default_bucket_alone(
    client: Redis, sync_redis: redis.Redis
) -> None:
    with pytest.raises(redis.ResponseError, match="default bucket"):
        Scripts(sync_redis).run_sync("ops_emit", [keys.sub_ops(5)], ['{"id":"msg_1"}'])
