"""schedule_cancel.lua through its wrapper (EventStore.cancel_schedule): it ends the event's
scheduled deliveries that are not attempted yet, failed with 'cancelled', through
fail_unsent (logged, out of the due set, the backlog counted down), and leaves alone those
leased, attempted or of another sender."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from tests.integration.conftest import save_endpoint
from tests.support import buckets
from webhook_service.history.records import StateLogged, parse_all
from webhook_service.ids import mark_of, new_id
from webhook_service.store import keys
from webhook_service.store.applications import DEFAULT_APP_ID
from webhook_service.store.deliveries import DeliveryStore
from webhook_service.store.due import claim_due
from webhook_service.store.events import Accepted, CancelOutcome, EventStore
from webhook_service.store.scripts import Scripts

pytestmark = pytest.mark.integration

NOW = 1_800_000_000_000
AT = NOW + 60_000
TYPE = "script.cancel"


async def _accept(client: Redis, deliver_at: int | None) -> Accepted:
    return await EventStore(client, Scripts(client)).accept(
        event_id=new_id("msg", NOW, mark=mark_of(DEFAULT_APP_ID)), event_type=TYPE,
        body='{"type":"script.cancel","data":{}}', key_id="key_1", now_ms=NOW, budget=3,
        grace_ms=1000, idempotency=None, wakeup=None, backlog_max=1_000_000,
        deliver_at_ms=deliver_at,
    )  # fmt: skip


async def test_cancel_ends_every_scheduled_delivery_once(client: Redis) -> None:
    scripts = Scripts(client)
    endpoints = [await save_endpoint(scripts, TYPE, NOW - n) for n in (1, 2)]
    accepted = await _accept(client, AT)
    events = EventStore(client, scripts)

    cancelled = await events.cancel_schedule(accepted.event_id, NOW + 1, sender="key_1")

    assert (cancelled.outcome, cancelled.count) == (CancelOutcome.CANCELLED, 2)
    records = await DeliveryStore(client, scripts).get_many(list(accepted.deliveries))
    assert {(r.status, r.last_error, r.attempts, r.next_at_ms) for r in records} == {
        ("failed", "cancelled", 0, None)
    }
    assert len(await claim_due(scripts, AT, 100, 1000)) == 0  # out of the due set
    assert [await client.get(keys.backlog(ep)) for ep in endpoints] == ["0", "0"]
    logged = [r for r in parse_all(await buckets.outbox(client)) if isinstance(r, StateLogged)]
    assert sorted((r.delivery_id, r.status, r.last_error) for r in logged) == sorted(
        (d, "failed", "cancelled") for d in accepted.deliveries
    )
    assert await client.hget(keys.metrics(0), "outcome:failed") == "2"

    again = await events.cancel_schedule(accepted.event_id, NOW + 2, sender="key_1")
    assert again.outcome is CancelOutcome.NONE


async def test_leased_and_attempted_deliveries_are_left_alone(client: Redis) -> None:
    scripts = Scripts(client)
    await save_endpoint(scripts, TYPE, NOW - 1)
    await save_endpoint(scripts, TYPE, NOW - 2)
    accepted = await _accept(client, AT)
    leased, waiting = accepted.deliveries
    store = DeliveryStore(client, scripts)
    assert len((await store.lease([leased], "tok", AT, 30_000, 10)).jobs) == 1

    cancelled = await EventStore(client, scripts).cancel_schedule(
        accepted.event_id, AT + 1, sender=None
    )

    assert (cancelled.outcome, cancelled.count) == (CancelOutcome.CANCELLED, 1)
    by_id = {r.id: r.status for r in await store.get_many([leased, waiting])}
    assert by_id == {leased: "scheduled", waiting: "failed"}


async def test_an_event_sent_at_once_has_nothing_to_cancel(client: Redis) -> None:
    scripts = Scripts(client)
    await save_endpoint(scripts, TYPE, NOW - 1)
    accepted = await _accept(client, None)
    cancelled = await EventStore(client, scripts).cancel_schedule(
        accepted.event_id, NOW + 1, sender=None
    )
    assert cancelled.outcome is CancelOutcome.NONE
    [record] = await DeliveryStore(client, scripts).get_many(list(accepted.deliveries))
    assert record.status == "pending"


async def test_another_senders_or_no_event_is_missing(client: Redis) -> None:
    scripts = Scripts(client)
    await save_endpoint(scripts, TYPE, NOW - 1)
    accepted = await _accept(client, AT)
    events = EventStore(client, scripts)
    assert (
        await events.cancel_schedule(accepted.event_id, NOW + 1, sender="key_2")
    ).outcome is CancelOutcome.MISSING
    missing = new_id("msg", NOW, mark=mark_of(DEFAULT_APP_ID))
    assert (await events.cancel_schedule(missing, NOW, sender=None)).outcome is (
        CancelOutcome.MISSING
    )
    [record] = await DeliveryStore(client, scripts).get_many(list(accepted.deliveries))
    assert record.status == "scheduled"
