"""At ``maxmemory`` a store takes no new work and finishes the work it holds: ingest is
refused before it writes anything, while a lease and a record (``#!lua flags=allow-oom``,
store/scripts.py) run whole, so what is in flight is sent, recorded and shipped."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis
from redis.asyncio import Redis

from tests.integration.conftest import save_endpoint
from tests.support.attempts import attempt_now
from tests.support.store_faults import full
from webhook_service.embedded import EmbeddedValkey
from webhook_service.ids import new_id
from webhook_service.store import keys
from webhook_service.store.events import EventStore
from webhook_service.store.refusals import Refusal, classify
from webhook_service.store.scripts import Scripts
from webhook_service.timeutil import now_ms

pytestmark = pytest.mark.integration

TYPE = "memory.full"


@pytest.fixture
async def store(fresh_valkey: EmbeddedValkey) -> AsyncIterator[Redis]:
    client = Redis.from_url(fresh_valkey.url, decode_responses=True)
    yield client
    await client.aclose()


async def _accept(client: Redis) -> list[str]:
    now = now_ms()
    accepted = await EventStore(client, Scripts(client)).accept(
        event_id=new_id("msg", now), event_type=TYPE, body="{}", key_id="key_1", now_ms=now,
        budget=3, grace_ms=1000, idempotency=None, wakeup=None, backlog_max=1_000_000,
    )  # fmt: skip
    return list(accepted.delivery_ids)


async def test_ingest_is_refused_and_writes_nothing(
    store: Redis, fresh_valkey: EmbeddedValkey
) -> None:
    await save_endpoint(Scripts(store), TYPE, now_ms())
    before = await store.dbsize()
    with full(fresh_valkey.url), pytest.raises(redis.RedisError) as refused:
        await _accept(store)
    assert classify(refused.value) is Refusal.OUT_OF_MEMORY
    assert await store.dbsize() == before
    assert await store.xlen(keys.outbox(0)) == 0


async def test_work_in_flight_is_leased_and_recorded(
    store: Redis, fresh_valkey: EmbeddedValkey
) -> None:
    await save_endpoint(Scripts(store), TYPE, now_ms())
    (delivery,) = await _accept(store)
    outbox = await store.xlen(keys.outbox(0))
    with full(fresh_valkey.url):
        assert await attempt_now(store, delivery, 200) == "succeeded"
    assert await store.hget(keys.delivery(delivery), "status") == "succeeded"
    # The attempt's record reached the outbox, for the shipper to write to the log.
    assert await store.xlen(keys.outbox(0)) == outbox + 1
