"""The log outbox into SQL, through the real scripts and the real shipper: every state change
leaves its record in the same atomic step, a batch written twice (or by two shippers) changes
nothing, an old record never moves a delivery back, and the outbox is trimmed to what was
committed."""

from __future__ import annotations

from typing import cast

import pytest
import redis
import sqlalchemy as sa
from redis.asyncio import Redis

from tests.integration.conftest import save_endpoint
from tests.support.stack import settings_of
from webhook_service.history import records, tables, writer
from webhook_service.history.shipper import Shipper
from webhook_service.ids import new_id
from webhook_service.store import keys
from webhook_service.store.applications import DEFAULT_APP_ID
from webhook_service.store.deliveries import Attempt, AttemptOutcome, DeliveryStore, HealthPolicy
from webhook_service.store.events import EventStore, IdempotencyClaim
from webhook_service.store.scripts import Scripts

pytestmark = [pytest.mark.integration, pytest.mark.both_logs]

NOW = 1_800_000_000_000
HEALTH = HealthPolicy(disable_after_ms=3_600_000, ops_budget=3)
TYPE = "log.shipped"


def _shipper(client: redis.Redis, engine: sa.Engine, batch: int = 2000) -> Shipper:
    return Shipper(client, engine, settings_of({"WEBHOOK_LOG_BATCH_SIZE": str(batch)}))


async def _one_delivery_with_two_attempts(client: Redis) -> tuple[str, str]:
    """To the one endpoint subscribed to TYPE (made by the first call)."""
    scripts = Scripts(client)
    if not await client.exists(keys.sub_type(DEFAULT_APP_ID, TYPE)):
        await save_endpoint(scripts, TYPE, NOW)
    event_id = new_id("msg", NOW)
    claim = IdempotencyClaim("key_1", "order-" + event_id, "fp", 60, "done", NOW + 60_000)
    accepted = await EventStore(client, scripts).accept(
        event_id=event_id, event_type=TYPE, body='{"n":1}', key_id="key_1", now_ms=NOW,
        budget=3, grace_ms=1000, idempotency=claim, wakeup=None, backlog_max=1_000_000,
    )  # fmt: skip
    (delivery_id,) = accepted.delivery_ids
    store = DeliveryStore(client, scripts)
    for number, at, code in ((1, NOW + 10, 500), (2, NOW + 20, 200)):
        lease = await store.lease([delivery_id], "tok", at, 30_000, 10)
        assert lease.jobs, lease.skipped
        attempt = Attempt(
            number, at, 7, code, None, "nope" if code == 500 else "ok",
            {"webhook-id": event_id}, {"content-type": "text/plain"},
        )  # fmt: skip
        await store.record(
            delivery_id=delivery_id, token="tok", now_ms=at, attempt=attempt,
            outcome=AttemptOutcome.OK if code == 200 else AttemptOutcome.FAIL, delay_ms=0,
            health=HEALTH,
        )  # fmt: skip
    return event_id, delivery_id


async def test_every_change_ships_once_and_the_outbox_is_trimmed(
    client: Redis, sync_redis: redis.Redis, log_engine: sa.Engine
) -> None:
    event_id, delivery_id = await _one_delivery_with_two_attempts(client)
    assert await client.xlen(keys.outbox(0)) == 3  # the event, two attempts

    assert _shipper(sync_redis, log_engine).ship_batch() == 3
    assert await client.xlen(keys.outbox(0)) == 0
    with log_engine.connect() as conn:
        event = conn.execute(sa.select(tables.events)).one()
        delivery = conn.execute(sa.select(tables.deliveries)).one()
        tried = conn.execute(sa.select(tables.attempts).order_by(tables.attempts.c.number)).all()
    assert (event.id, event.type, event.key_id, event.idempotency_key, event.body) == (
        event_id, TYPE, "key_1", "order-" + event_id, '{"n":1}',
    )  # fmt: skip
    assert (delivery.id, delivery.event_id, delivery.status, delivery.attempts) == (
        delivery_id, event_id, "succeeded", 2,
    )  # fmt: skip
    assert (delivery.last_code, delivery.last_class, delivery.next_at_ms) == (200, "2xx", None)
    assert [(a.number, a.status_code, a.response_body) for a in tried] == [
        (1, 500, "nope"), (2, 200, "ok"),
    ]  # fmt: skip
    assert tried[0].request_headers == {"webhook-id": event_id}
    assert tried[0].response_headers == {"content-type": "text/plain"}


async def test_a_batch_written_twice_or_out_of_order_changes_nothing(
    client: Redis, sync_redis: redis.Redis, log_engine: sa.Engine
) -> None:
    await _one_delivery_with_two_attempts(client)
    entries = cast(list[records.Entry], sync_redis.xrange(keys.outbox(0)))
    batch = records.parse_all(entries)

    def snapshot() -> list[tuple[object, ...]]:
        with log_engine.connect() as conn:
            return [
                tuple(row)
                for table in (tables.events, tables.deliveries, tables.attempts)
                for row in conn.execute(sa.select(table))
            ]

    with log_engine.begin() as conn:
        writer.write(conn, batch)
    once = snapshot()
    # Again whole; then the first attempt's record alone, late: the succeeded delivery
    # does not go back to pending.
    for again in (batch, batch[:2]):
        with log_engine.begin() as conn:
            writer.write(conn, again)
        assert snapshot() == once


async def test_two_shippers_at_once_write_each_record_once(
    client: Redis, sync_redis: redis.Redis, log_engine: sa.Engine
) -> None:
    for _ in range(5):
        await _one_delivery_with_two_attempts(client)
    first, second = _shipper(sync_redis, log_engine, 4), _shipper(sync_redis, log_engine, 4)
    # Both read before either trims: each writes what the other may write too.
    while first.ship_batch() + second.ship_batch():
        pass
    with log_engine.connect() as conn:
        counts = [
            conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one()
            for t in (tables.events, tables.deliveries, tables.attempts)
        ]
    assert counts == [5, 5, 10]
    assert await client.xlen(keys.outbox(0)) == 0
