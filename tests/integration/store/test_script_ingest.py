"""ingest.lua through its wrapper (EventStore.accept, IngestArgs, Accepted): every answer it
gives, the typed reply, and what it left in Redis."""

from __future__ import annotations

import json
from typing import Literal, cast

import pytest
from redis.asyncio import Redis

from tests.integration.conftest import save_endpoint
from webhook_service.ids import new_id
from webhook_service.store import keys
from webhook_service.store.events import (
    Accepted,
    EventStore,
    IdempotencyClaim,
    IngestOutcome,
    InlineWakeup,
)
from webhook_service.store.scripts import Scripts

pytestmark = pytest.mark.integration

NOW = 1_800_000_000_000
TYPE = "script.ingest"
GRACE_MS = 1000
BODY = '{"type":"script.ingest","data":{}}'


def _claim(
    fingerprint: str = "fp-1",
    state: Literal["done", "in_flight"] = "done",
    until_ms: int = NOW + 10_000,
) -> IdempotencyClaim:
    return IdempotencyClaim("key_1", "order-1", fingerprint, 60, state, until_ms)


async def _accept(
    client: Redis,
    now: int = NOW,
    *,
    idempotency: IdempotencyClaim | None = None,
    wakeup: InlineWakeup | None = None,
    backlog_max: int = 1_000_000,
) -> Accepted:
    return await EventStore(client, Scripts(client)).accept(
        event_id=new_id("msg", now), event_type=TYPE, body=BODY, key_id="key_1", now_ms=now,
        budget=3, grace_ms=GRACE_MS, idempotency=idempotency, wakeup=wakeup,
        backlog_max=backlog_max,
    )  # fmt: skip


async def _outbox(client: Redis) -> list[dict[str, str]]:
    """The log outbox's entries, oldest first: their fields."""
    entries = cast(list[tuple[str, dict[str, str]]], await client.xrange(keys.LOG_OUTBOX))
    return [fields for _, fields in entries]


async def test_created_fans_out_to_every_subscribed_endpoint(client: Redis) -> None:
    scripts = Scripts(client)
    first, second = (
        await save_endpoint(scripts, TYPE, NOW - 2),
        await save_endpoint(scripts, TYPE, NOW - 1),
    )
    await save_endpoint(scripts, "script.other", NOW - 1)  # another type's: not reached

    accepted = await _accept(client)

    assert accepted.outcome is IngestOutcome.CREATED
    assert (accepted.event_type, accepted.created_ms, accepted.fanout) == (TYPE, NOW, 2)
    assert len(accepted.delivery_ids) == 2 and not accepted.woken
    event = await client.hgetall(keys.event(accepted.event_id))
    assert (event["type"], event["body"], event["key"], event["live"]) == (
        TYPE, BODY, "key_1", "2",
    )  # fmt: skip
    for delivery_id in accepted.delivery_ids:
        delivery = await client.hgetall(keys.delivery(delivery_id))
        assert (delivery["status"], delivery["attempts"], delivery["budget"]) == (
            "pending", "0", "3",
        )  # fmt: skip
        assert await client.zscore(keys.DUE, delivery_id) == NOW + GRACE_MS
    assert [await client.get(keys.backlog(ep)) for ep in (first, second)] == ["1", "1"]
    assert await client.hget(keys.METRICS, "events_accepted") == "1"
    (record,) = await _outbox(client)
    assert record[keys.OutboxField.BODY] == BODY
    logged = json.loads(record[keys.OutboxField.EVENT])
    assert (logged["id"], logged["type"], logged["t"], logged["key"]) == (
        accepted.event_id, TYPE, NOW, "key_1",
    )  # fmt: skip
    assert "idem" not in logged
    assert sorted(row[1] for row in logged["dlv"]) == sorted([first, second])


async def test_created_with_an_idempotency_key_keeps_its_record(client: Redis) -> None:
    await save_endpoint(Scripts(client), TYPE, NOW - 1)
    claim = _claim()

    accepted = await _accept(client, idempotency=claim)

    assert (accepted.outcome, accepted.fanout, len(accepted.delivery_ids)) == (
        IngestOutcome.CREATED, 1, 1,
    )  # fmt: skip
    record_key = keys.idempotency(claim.key_id, claim.key)
    assert await client.hgetall(record_key) == {
        "hash": "fp-1", "state": "done", "event": accepted.event_id,
        "until": str(NOW + 10_000), "fanout": "1",
    }  # fmt: skip
    assert 0 < await client.ttl(record_key) <= 60
    (record,) = await _outbox(client)
    assert json.loads(record[keys.OutboxField.EVENT])["idem"] == "order-1"


async def test_a_repeat_is_answered_from_the_record_and_stores_nothing(client: Redis) -> None:
    scripts = Scripts(client)
    await save_endpoint(scripts, TYPE, NOW - 2)
    await save_endpoint(scripts, TYPE, NOW - 1)
    first = await _accept(client, idempotency=_claim())
    size, outbox = await client.dbsize(), len(await _outbox(client))

    repeat = await _accept(client, NOW + 5, idempotency=_claim())

    assert repeat == Accepted(IngestOutcome.REPLAY, first.event_id, TYPE, NOW, (), 2)
    assert (await client.dbsize(), len(await _outbox(client))) == (size, outbox)


async def test_a_repeat_with_another_body_is_a_mismatch(client: Redis) -> None:
    await _accept(client, idempotency=_claim())
    size = await client.dbsize()

    repeat = await _accept(client, NOW + 5, idempotency=_claim(fingerprint="fp-2"))

    assert repeat == Accepted(IngestOutcome.MISMATCH)
    assert await client.dbsize() == size


async def test_a_repeat_while_the_first_is_in_flight_waits_for_it(client: Redis) -> None:
    claim = _claim(state="in_flight", until_ms=NOW + 100)
    first = await _accept(client, idempotency=claim)
    record_key = keys.idempotency(claim.key_id, claim.key)
    assert await client.hget(record_key, "state") == "in_flight"

    assert await _accept(client, NOW + 99, idempotency=claim) == Accepted(IngestOutcome.IN_FLIGHT)
    # Past `until` the first request is taken to have ended: its answer is replayed.
    late = await _accept(client, NOW + 101, idempotency=claim)
    assert (late.outcome, late.event_id) == (IngestOutcome.REPLAY, first.event_id)


async def test_a_full_outbox_refuses_before_writing(client: Redis) -> None:
    await save_endpoint(Scripts(client), TYPE, NOW - 1)
    await _accept(client)
    await _accept(client, NOW + 1)
    size = await client.dbsize()
    outbox = len(await _outbox(client))
    assert outbox == 2

    refused = await _accept(client, NOW + 2, idempotency=_claim(), backlog_max=outbox)

    assert refused == Accepted(IngestOutcome.BACKLOG_FULL)
    assert (await client.dbsize(), len(await _outbox(client))) == (size, outbox)
    assert await client.hget(keys.METRICS, "events_accepted") == "2"
    # One record fewer and it is taken.
    created = await _accept(client, NOW + 3, backlog_max=outbox + 1)
    assert created.outcome is IngestOutcome.CREATED


async def test_a_disabled_endpoints_delivery_is_kept_but_not_pending(client: Redis) -> None:
    scripts = Scripts(client)
    live = await save_endpoint(scripts, TYPE, NOW - 2)
    disabled = await save_endpoint(scripts, TYPE, NOW - 1)
    await client.hset(keys.endpoint(disabled), "disabled", "1")

    accepted = await _accept(client)

    assert (accepted.outcome, accepted.fanout, len(accepted.delivery_ids)) == (
        IngestOutcome.CREATED, 2, 1,
    )  # fmt: skip
    (pending,) = accepted.delivery_ids
    logged = json.loads((await _outbox(client))[0][keys.OutboxField.EVENT])
    statuses = {row[1]: (row[0], row[2]) for row in logged["dlv"]}
    assert statuses[live] == (pending, "pending")
    kept, status = statuses[disabled]
    assert status == "disabled"
    assert await client.hget(keys.delivery(kept), "status") == "disabled"
    assert await client.zscore(keys.DUE, kept) is None
    assert await client.get(keys.backlog(disabled)) is None


async def test_an_inline_wakeup_is_queued_with_the_event(client: Redis) -> None:
    await save_endpoint(Scripts(client), TYPE, NOW - 1)
    queue = "test.script.ingest"

    accepted = await _accept(client, wakeup=InlineWakeup(queue, "#TASK# #IDS#", 10))

    assert accepted.outcome is IngestOutcome.CREATED and accepted.woken
    (pending,) = accepted.delivery_ids
    (message,) = cast(list[str], await client.lrange(queue, 0, -1))
    assert message.startswith(f"{accepted.event_id}.1 {pending}")
    assert await client.hget(keys.LUA_KEYS["wakeup"] + queue, "task") == f"{accepted.event_id}.1"
