"""Redis keeps only the work in flight: once the shipper has committed a finished delivery's
records, the delivery leaves Redis (after the hot window), and its event leaves with the last
of its deliveries; pending work never leaves, and an idempotent repeat still answers."""

from __future__ import annotations

import time

import pytest
import redis
import sqlalchemy as sa
from redis.asyncio import Redis

from tests.integration.conftest import save_endpoint
from tests.support.attempts import attempt_now
from tests.support.stack import settings_of
from webhook_service.history import tables
from webhook_service.history.shipper import Shipper
from webhook_service.ids import new_id
from webhook_service.store import keys
from webhook_service.store.deliveries import DeliveryStore, RetryOutcome
from webhook_service.store.events import EventStore, IdempotencyClaim
from webhook_service.store.scripts import Scripts
from webhook_service.timeutil import now_ms

pytestmark = pytest.mark.integration

TYPE = "log.released"


def _shipper(client: redis.Redis, engine: sa.Engine, hot_seconds: float) -> Shipper:
    return Shipper(client, engine, settings_of({"WEBHOOK_HOT_SECONDS": str(hot_seconds)}))


async def _accept(client: Redis, idempotency_key: str | None = None) -> tuple[str, list[str]]:
    scripts = Scripts(client)
    now = now_ms()
    event_id = new_id("msg", now)
    claim = (
        IdempotencyClaim("key_1", idempotency_key, "fp", 60, "done", now + 60_000)
        if idempotency_key
        else None
    )
    accepted = await EventStore(client, scripts).accept(
        event_id=event_id, event_type=TYPE, body="{}", key_id="key_1", now_ms=now, budget=3,
        grace_ms=1000, idempotency=claim, wakeup=None, backlog_max=1_000_000,
    )  # fmt: skip
    return event_id, list(accepted.delivery_ids)


async def test_finished_work_leaves_redis_pending_work_stays(
    client: Redis, sync_redis: redis.Redis, log_engine: sa.Engine
) -> None:
    scripts = Scripts(client)
    for _ in range(2):
        await save_endpoint(scripts, TYPE, now_ms())
    event_id, (done, pending) = await _accept(client, "order-1")
    assert await attempt_now(client, done, 200, None) == "succeeded"
    assert await attempt_now(client, pending, 500, 0) == "pending"

    shipper = _shipper(sync_redis, log_engine, 0)
    shipper.ship_once()
    # The finished delivery is gone; the pending one and its event stay.
    assert not await client.exists(keys.delivery(done))
    assert await client.exists(keys.delivery(pending), keys.event(event_id)) == 2
    assert await client.hget(keys.event(event_id), "live") == "1"

    assert await attempt_now(client, pending, 200, None) == "succeeded"
    shipper.ship_once()
    assert not await client.exists(keys.delivery(pending), keys.event(event_id))
    with log_engine.connect() as conn:
        statuses = dict(
            conn.execute(sa.select(tables.deliveries.c.id, tables.deliveries.c.status)).all()
        )
    assert statuses == {done: "succeeded", pending: "succeeded"}
    # A repeat with the same idempotency key is answered from its record alone.
    repeat = await EventStore(client, scripts).accept(
        event_id=new_id("msg", now_ms()), event_type=TYPE, body="{}", key_id="key_1",
        now_ms=now_ms(), budget=3, grace_ms=1000,
        idempotency=IdempotencyClaim("key_1", "order-1", "fp", 60, "done", now_ms() + 60_000),
        wakeup=None, backlog_max=1_000_000,
    )  # fmt: skip
    assert (repeat.outcome, repeat.event_id, repeat.fanout) == ("replay", event_id, 2)


async def test_an_event_no_endpoint_takes_leaves_once_logged(
    client: Redis, sync_redis: redis.Redis, log_engine: sa.Engine
) -> None:
    event_id, deliveries = await _accept(client)
    assert deliveries == []
    _shipper(sync_redis, log_engine, 0).ship_once()
    assert not await client.exists(keys.event(event_id))
    assert await client.zcard(keys.release(0)) == 0


async def test_the_hot_window_keeps_finished_work_for_a_while(
    client: Redis, sync_redis: redis.Redis, log_engine: sa.Engine
) -> None:
    await save_endpoint(Scripts(client), TYPE, now_ms())
    event_id, (delivery_id,) = await _accept(client)
    assert await attempt_now(client, delivery_id, 200, None) == "succeeded"
    shipper = _shipper(sync_redis, log_engine, 0.5)
    shipper.ship_once()
    assert await client.exists(keys.delivery(delivery_id), keys.event(event_id)) == 2
    time.sleep(0.6)
    shipper.ship_once()  # an idle pass lets go of what the window has passed
    assert not await client.exists(keys.delivery(delivery_id), keys.event(event_id))


async def test_a_delivery_retried_before_its_release_stays(
    client: Redis, sync_redis: redis.Redis, log_engine: sa.Engine
) -> None:
    await save_endpoint(Scripts(client), TYPE, now_ms())
    _, (delivery_id,) = await _accept(client)
    assert await attempt_now(client, delivery_id, 200, None) == "succeeded"
    shipper = _shipper(sync_redis, log_engine, 0.3)
    shipper.ship_once()
    store = DeliveryStore(client, Scripts(client))
    assert (await store.retry([delivery_id], now_ms(), 1000)).outcomes == [RetryOutcome.OK]
    time.sleep(0.4)
    shipper.ship_once()
    assert await client.hget(keys.delivery(delivery_id), "status") == "pending"
