"""The backlog cap, for real: a Valkey, a worker, a scheduler whose shipper can never write
(its log is a PostgreSQL nobody runs), and an API in-process allowing CAP outbox records.

Past the cap a new event is 503 ``log-backlog-full`` and nothing of it is stored (a repeat
of one accepted before is still answered); once the outbox is shipped, the same request is
accepted. Meanwhile delivery never stops: an attempt
in flight is recorded past the cap, and a failed delivery retried."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from redis.asyncio import Redis

from tests.integration.conftest import (
    Api,
    create_endpoint,
    send_event,
    serve_api,
    settings_for,
    wait_for,
)
from tests.support.log_away import outbox_length, ship_all, start_shipless_scheduler
from tests.support.receiver import Receiver
from tests.support.stack import Stack, start_stack
from webhook_service.api.problems import CONTENT_TYPE, PROBLEM_TYPE_BASE
from webhook_service.history import tables
from webhook_service.history.database import sync_engine
from webhook_service.store import keys

pytestmark = pytest.mark.integration

CAP = 30
NO_ONE = "backlog.unsubscribed"  # an event of this type makes one outbox record, no delivery


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    running = start_stack(tmp_path_factory.mktemp("stack"), scheduler=False)
    start_shipless_scheduler(running)
    yield running
    running.stop()


@pytest.fixture
async def capped(stack: Stack) -> AsyncIterator[Api]:
    settings = settings_for(stack).model_copy(update={"log_backlog_max": CAP})
    async with serve_api(settings) as (_, api):
        yield api


@pytest.fixture
async def store(stack: Stack) -> AsyncIterator[Redis]:
    client = Redis.from_url(stack.valkey.url, decode_responses=True)
    yield client
    await client.aclose()


async def _post(api: Api, key: str | None = None) -> tuple[int, Any, dict[str, str]]:
    headers = {"Idempotency-Key": key} if key else None
    return await api.call(
        "POST", "/v1/events", json={"type": NO_ONE, "data": {"n": 1}}, headers=headers
    )


async def _fill(api: Api) -> tuple[int, Any, dict[str, str]]:
    """Events until one is refused: that refusal."""
    for _ in range(CAP + 1):
        answer = await _post(api)
        if answer[0] != 202:
            return answer
    raise AssertionError(f"{CAP + 1} events accepted under a cap of {CAP}")


async def _stored(store: Redis) -> tuple[int, int, int, object]:
    """What a new event would add to: the outbox, the event hashes, the idempotency
    records, the count of events accepted."""
    events = [k async for k in store.scan_iter(keys.in_bucket(0, "event", "*"), count=1000)]
    claims = [k async for k in store.scan_iter(keys.idempotency_records(0), count=1000)]
    accepted = await store.hget(keys.metrics(0), "events_accepted")
    return await store.xlen(keys.outbox(0)), len(events), len(claims), accepted


async def test_a_full_backlog_refuses_new_events_and_stores_nothing(
    stack: Stack, capped: Api, store: Redis
) -> None:
    ship_all(stack)
    status, _, _ = await _post(capped, key="accepted-before")
    assert status == 202
    status, problem, headers = await _fill(capped)
    assert status == 503, problem
    assert headers["Content-Type"].startswith(CONTENT_TYPE)
    assert problem["type"] == PROBLEM_TYPE_BASE + "log-backlog-full"
    assert "delivery log's database is behind" in problem["detail"]
    assert int(headers["Retry-After"]) > 0
    assert await store.xlen(keys.outbox(0)) == CAP

    before = await _stored(store)
    status, problem, _ = await _post(capped, key="refused-while-full")
    assert (status, problem["type"]) == (503, PROBLEM_TYPE_BASE + "log-backlog-full")
    assert await _stored(store) == before
    # A repeat of an event accepted before stores nothing either: it is answered.
    status, _, headers = await _post(capped, key="accepted-before")
    assert (status, headers.get("Idempotent-Replayed")) == (202, "true")

    # The log takes the backlog: the same request is a new event now, not a replay.
    assert ship_all(stack) >= CAP
    status, accepted, headers = await _post(capped, key="refused-while-full")
    assert status == 202, accepted
    assert "Idempotent-Replayed" not in headers
    assert await store.exists(keys.event(accepted["id"]))


async def test_delivery_goes_on_while_the_backlog_is_full(
    stack: Stack, capped: Api, store: Redis, receiver: Receiver
) -> None:
    ship_all(stack)
    answer = {"code": 500}
    receiver.behaviours["refusing"] = lambda _name, _n: answer["code"]
    receiver.slow["held"] = 1.5  # answered once the backlog is full
    await create_endpoint(capped, receiver, "refusing", ["backlog.retried"])
    await create_endpoint(capped, receiver, "held", ["backlog.held"])

    async def status_of(event_id: str) -> str:
        _, event, _ = await capped.call("GET", f"/v1/events/{event_id}")
        (delivery,) = event["deliveries"]
        found: str = delivery["status"]
        return found

    retried = await send_event(capped, "backlog.retried", {})

    async def spent() -> bool:
        return await status_of(retried) == "failed"

    await wait_for(spent)
    held = await send_event(capped, "backlog.held", {})

    async def arrived() -> bool:
        return bool(receiver.for_endpoint("held"))

    await wait_for(arrived, every=0.02)
    status, problem, _ = await _fill(capped)
    assert (status, problem["type"]) == (503, PROBLEM_TYPE_BASE + "log-backlog-full")
    assert await store.xlen(keys.outbox(0)) == CAP
    assert await status_of(held) == "pending"  # its receiver is still answering

    # The attempt in flight is recorded past the cap.
    async def delivered() -> bool:
        return await status_of(held) == "succeeded"

    await wait_for(delivered)
    assert await store.xlen(keys.outbox(0)) == CAP + 1

    # A retry is accepted, sent and recorded, the backlog full all along.
    answer["code"] = 200
    _, event, _ = await capped.call("GET", f"/v1/events/{retried}")
    delivery_id = event["deliveries"][0]["id"]
    status, body, _ = await capped.call("POST", f"/v1/deliveries/{delivery_id}/retry")
    assert status == 202, body

    async def retried_ok() -> bool:
        return await status_of(retried) == "succeeded"

    await wait_for(retried_ok)
    assert await store.xlen(keys.outbox(0)) > CAP + 1
    status, _, _ = await _post(capped)
    assert status == 503

    # The log back: every attempt made meanwhile is in it, once.
    ship_all(stack)
    assert outbox_length(stack) == 0
    engine = sync_engine(settings_for(stack))
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                sa.select(tables.deliveries.c.event_id, tables.attempts.c.status_code)
                .join(tables.attempts, tables.attempts.c.delivery_id == tables.deliveries.c.id)
                .where(tables.deliveries.c.event_id.in_([held, retried]))
                .order_by(tables.attempts.c.number)
            ).all()
    finally:
        engine.dispose()
    sent = {e: [r.status for r in receiver.received if r.webhook_id == e] for e in (held, retried)}
    assert {e: [row.status_code for row in rows if row.event_id == e] for e in sent} == sent
    assert sent[retried][-1] == 200 and len(sent[retried]) == 5  # 4 spent, then the retry
