"""Finished work that has left Redis comes back from the log when an admin acts on it: a
retry makes the delivery pending again with one more attempt, a replay and an expunge find
the event; each then goes through the usual scripts, and leaves Redis again once done."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis
import sqlalchemy as sa
from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.integration.conftest import save_endpoint
from tests.support.attempts import attempt_now
from tests.support.stack import settings_of
from webhook_service.embedded import EmbeddedValkey
from webhook_service.history import tables
from webhook_service.history.database import async_engine, sync_engine, upgrade
from webhook_service.history.reader import HistoryReader
from webhook_service.history.revive import Reviver
from webhook_service.history.shipper import Shipper
from webhook_service.ids import new_id
from webhook_service.store import keys
from webhook_service.store.applications import DEFAULT_APP_ID
from webhook_service.store.deliveries import DeliveryStore
from webhook_service.store.events import EventStore, ExpungeOutcome, ReplayOutcome
from webhook_service.store.scripts import Scripts
from webhook_service.timeutil import now_ms

pytestmark = pytest.mark.integration

TYPE = "log.revived"


@pytest.fixture
def settings_env(tmp_path: Path) -> dict[str, str]:
    return {"WEBHOOK_DATA_DIR": str(tmp_path), "WEBHOOK_HOT_SECONDS": "0"}


@pytest.fixture
def shipper(valkey: EmbeddedValkey, settings_env: dict[str, str]) -> Iterator[Shipper]:
    client = redis.Redis.from_url(valkey.url, decode_responses=True)
    engine = sync_engine(settings_of(settings_env))
    upgrade(engine)
    yield Shipper(client, engine, settings_of(settings_env))
    engine.dispose()
    client.close()


@pytest.fixture
async def reader(settings_env: dict[str, str], shipper: Shipper) -> AsyncIterator[AsyncEngine]:
    engine = async_engine(settings_of(settings_env))
    yield engine
    await engine.dispose()


def _reviver(client: Redis, engine: AsyncEngine) -> Reviver:
    scripts = Scripts(client)
    history = HistoryReader(engine, DeliveryStore(client, scripts), EventStore(client, scripts), 5)
    return Reviver(history, scripts, hot_ms=0)


async def _released_delivery(client: Redis, shipper: Shipper) -> tuple[str, str]:
    scripts = Scripts(client)
    await save_endpoint(scripts, TYPE, now_ms())
    event_id = new_id("msg", now_ms())
    accepted = await EventStore(client, scripts).accept(
        event_id=event_id, event_type=TYPE, body='{"a":1}', key_id="key_1", now_ms=now_ms(),
        budget=1, grace_ms=1000, idempotency=None, wakeup=None, backlog_max=1_000_000,
    )  # fmt: skip
    (delivery_id,) = accepted.delivery_ids
    assert await attempt_now(client, delivery_id, 500) == "failed"
    shipper.ship_once()
    assert not await client.exists(keys.delivery(delivery_id), keys.event(event_id))
    return event_id, delivery_id


async def test_a_retry_brings_a_released_delivery_back(
    client: Redis, shipper: Shipper, reader: AsyncEngine
) -> None:
    event_id, delivery_id = await _released_delivery(client, shipper)
    scripts = Scripts(client)
    reviver = Reviver(
        HistoryReader(reader, DeliveryStore(client, scripts), EventStore(client, scripts), 5.0),
        scripts,
        hot_ms=0,
    )
    store = DeliveryStore(client, scripts)

    assert await reviver.retry(store, [delivery_id, "dlv_nothere"], now_ms(), 0) == [
        "ok", "missing",
    ]  # fmt: skip
    raw = await client.hgetall(keys.delivery(delivery_id))
    assert (raw["status"], raw["attempts"], raw["budget"]) == ("pending", "1", "2")
    assert await client.hget(keys.event(event_id), "body") == '{"a":1}'
    assert await client.hget(keys.event(event_id), "app") == DEFAULT_APP_ID
    # A second retry finds it on its way.
    assert await reviver.retry(store, [delivery_id], now_ms(), 0) == ["pending"]

    assert await attempt_now(client, delivery_id, 200) == "succeeded"
    shipper.ship_once()
    with shipper._engine.connect() as conn:
        row = conn.execute(
            sa.select(tables.deliveries).where(tables.deliveries.c.id == delivery_id)
        ).one()
        numbers = conn.execute(sa.select(tables.attempts.c.number)).scalars().all()
    assert (row.status, row.attempts) == ("succeeded", 2)
    assert sorted(numbers) == [1, 2]
    assert not await client.exists(keys.delivery(delivery_id), keys.event(event_id))


async def test_replay_and_expunge_find_an_event_that_left(
    client: Redis, shipper: Shipper, reader: AsyncEngine
) -> None:
    event_id, _ = await _released_delivery(client, shipper)
    scripts = Scripts(client)
    reviver = Reviver(
        HistoryReader(reader, DeliveryStore(client, scripts), EventStore(client, scripts), 5.0),
        scripts,
        hot_ms=0,
    )
    events = EventStore(client, scripts)

    assert await reviver.restore_event(event_id, now_ms())
    # Back with its application: the replay fans out within it.
    assert await client.hget(keys.event(event_id), "app") == DEFAULT_APP_ID
    replayed = await events.replay(event_id, None, now_ms(), 1, 0, sender="key_1")
    assert replayed.outcome is ReplayOutcome.OK and len(replayed.pending) == 1
    assert await attempt_now(client, replayed.pending[0], 200) == "succeeded"
    shipper.ship_once()
    assert not await client.exists(keys.event(event_id))

    assert await reviver.restore_event(event_id, now_ms())
    expunged = await events.expunge_payload(event_id, now_ms(), sender="key_1")
    assert expunged.outcome is ExpungeOutcome.EXPUNGED
    shipper.ship_once()
    shipper.ship_once()
    with shipper._engine.connect() as conn:
        body, expunged = conn.execute(
            sa.select(tables.events.c.body, tables.events.c.expunged_ms).where(
                tables.events.c.id == event_id  # not the delivery.exhausted event it caused
            )
        ).one()
        deliveries = conn.execute(
            sa.select(tables.deliveries.c.status, tables.deliveries.c.application)
        ).all()
    assert body is None and expunged is not None
    assert sorted(deliveries) == [("failed", DEFAULT_APP_ID), ("succeeded", DEFAULT_APP_ID)]
    assert not await client.exists(keys.event(event_id))
    assert not await reviver.restore_event("msg_nothere", now_ms())
