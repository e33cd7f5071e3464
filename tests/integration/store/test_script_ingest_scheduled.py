"""ingest.lua with a deliver_at (IngestArgs.deliver_at_ms): the deliveries wait in the due
set for their time with no wake-up now, read and log as ``scheduled``, and the due claim
hands them out at that time, not before; a time now or past goes at once."""

from __future__ import annotations

import json

import pytest
from redis.asyncio import Redis

from tests.integration.conftest import save_endpoint
from tests.support import buckets
from webhook_service.history.records import EventLogged, parse_all
from webhook_service.ids import mark_of, new_id
from webhook_service.store import keys
from webhook_service.store.applications import DEFAULT_APP_ID
from webhook_service.store.deliveries import DeliveryStore, LeaseSkip
from webhook_service.store.due import claim_due
from webhook_service.store.events import Accepted, EventStore, IngestOutcome, InlineWakeup
from webhook_service.store.scripts import Scripts

pytestmark = pytest.mark.integration

NOW = 1_800_000_000_000
AT = NOW + 60_000
TYPE = "script.scheduled"
GRACE_MS = 1000
QUEUE = "wake-test"


async def _accept(client: Redis, deliver_at: int | None, *, wake: bool = True) -> Accepted:
    wakeup = InlineWakeup(QUEUE, "#TASK# #IDS#", 10) if wake else None
    return await EventStore(client, Scripts(client)).accept(
        event_id=new_id("msg", NOW, mark=mark_of(DEFAULT_APP_ID)), event_type=TYPE,
        body='{"type":"script.scheduled","data":{}}', key_id="key_1", now_ms=NOW, budget=3,
        grace_ms=GRACE_MS, idempotency=None, wakeup=wakeup, backlog_max=1_000_000,
        deliver_at_ms=deliver_at,
    )  # fmt: skip


async def test_scheduled_deliveries_wait_for_their_time_without_a_wakeup(client: Redis) -> None:
    scripts = Scripts(client)
    endpoints = {await save_endpoint(scripts, TYPE, NOW - n) for n in (1, 2)}

    accepted = await _accept(client, AT)

    assert accepted.outcome is IngestOutcome.CREATED and accepted.fanout == 2
    assert accepted.delivery_ids == ()  # none pending now: nothing to wake
    assert await client.llen(QUEUE) == 0
    for delivery_id in accepted.deliveries:
        raw = await client.hgetall(keys.delivery(delivery_id))
        # The scripts see a pending delivery, due at its time.
        assert (raw["status"], raw["next_at"], raw["sched"]) == ("pending", str(AT), str(AT))
        assert await client.zscore(keys.due(keys.bucket_of(delivery_id)), delivery_id) == AT
    records = await DeliveryStore(client, scripts).get_many(list(accepted.deliveries))
    assert {(r.status, r.next_at_ms, r.endpoint_id) for r in records} == {
        ("scheduled", AT, ep) for ep in endpoints
    }
    event = await EventStore(client, scripts).get(accepted.event_id)
    assert event is not None and event.deliver_at_ms == AT
    [logged] = parse_all(await buckets.outbox(client))
    assert isinstance(logged, EventLogged) and logged.deliver_at_ms == AT
    assert {d.status for d in logged.deliveries} == {"scheduled"}

    assert len(await claim_due(scripts, AT - 1, 100, GRACE_MS)) == 0
    claimed = await claim_due(scripts, AT, 100, GRACE_MS)
    assert sorted(claimed.fresh) == sorted(accepted.deliveries)


async def test_a_lease_before_its_time_is_early(client: Redis) -> None:
    scripts = Scripts(client)
    await save_endpoint(scripts, TYPE, NOW - 1)
    accepted = await _accept(client, AT)
    store = DeliveryStore(client, scripts)

    early = await store.lease(list(accepted.deliveries), "tok", AT - 10_000, 30_000, 10)
    assert early.jobs == [] and list(early.skipped.values()) == [LeaseSkip.EARLY]
    due = await store.lease(list(accepted.deliveries), "tok", AT, 30_000, 10)
    assert [job.delivery_id for job in due.jobs] == list(accepted.deliveries)
    # Leased, not attempted: still shown scheduled until the attempt is recorded.
    [record] = await store.get_many(list(accepted.deliveries))
    assert record.status == "scheduled"


@pytest.mark.parametrize("deliver_at", [NOW, NOW - 5_000])
async def test_now_or_past_goes_at_once_and_is_kept(client: Redis, deliver_at: int) -> None:
    scripts = Scripts(client)
    await save_endpoint(scripts, TYPE, NOW - 1)

    accepted = await _accept(client, deliver_at)

    assert accepted.delivery_ids == accepted.deliveries and len(accepted.deliveries) == 1
    assert await client.llen(QUEUE) == 1
    [record] = await DeliveryStore(client, scripts).get_many(list(accepted.deliveries))
    assert (record.status, record.next_at_ms) == ("pending", NOW)
    assert await client.hget(keys.event(accepted.event_id), "at") == str(deliver_at)
    [logged] = parse_all(await buckets.outbox(client))
    assert isinstance(logged, EventLogged) and logged.deliver_at_ms == deliver_at
    assert [d.status for d in logged.deliveries] == ["pending"]


async def test_no_deliver_at_writes_no_field(client: Redis) -> None:
    scripts = Scripts(client)
    await save_endpoint(scripts, TYPE, NOW - 1)
    accepted = await _accept(client, None, wake=False)
    assert "at" not in await client.hgetall(keys.event(accepted.event_id))
    [delivery_id] = accepted.deliveries
    assert "sched" not in await client.hgetall(keys.delivery(delivery_id))
    [entry] = await buckets.outbox(client)
    assert "at" not in json.loads(entry[1][keys.OutboxField.EVENT])


async def test_a_disabled_endpoints_delivery_is_held_not_scheduled(client: Redis) -> None:
    scripts = Scripts(client)
    endpoint = await save_endpoint(scripts, TYPE, NOW - 1)
    await client.hset(keys.endpoint(endpoint), "disabled", "1")

    accepted = await _accept(client, AT)

    [delivery_id] = accepted.deliveries
    raw = await client.hgetall(keys.delivery(delivery_id))
    assert raw["status"] == "disabled" and "sched" not in raw
    assert await client.zscore(keys.due(keys.bucket_of(delivery_id)), delivery_id) is None
    [logged] = parse_all(await buckets.outbox(client))
    assert isinstance(logged, EventLogged)
    assert [d.status for d in logged.deliveries] == ["disabled"]
