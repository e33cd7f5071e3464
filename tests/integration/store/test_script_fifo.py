"""A FIFO endpoint's line (lua/common.lua pending_in, pending_out, fifo_release) through the
scripts that move deliveries in and out of 'pending': only the head is due and leased, the
one that ends hands the line on (leased in the same record step when asked), a disabled
endpoint takes its whole line, and a deleted endpoint or one no longer FIFO dissolves it."""

from __future__ import annotations

from typing import cast

import pytest
from redis.asyncio import Redis

from tests.integration.conftest import save_endpoint
from webhook_service.ids import new_id
from webhook_service.store import keys
from webhook_service.store.deliveries import (
    Attempt,
    AttemptOutcome,
    DeliveryStore,
    HealthPolicy,
    LeaseSkip,
    NextLease,
    Recorded,
    RecordOutcome,
)
from webhook_service.store.endpoints import EndpointDeleteArgs, EndpointSaveArgs
from webhook_service.store.events import EventStore
from webhook_service.store.scripts import Scripts

pytestmark = pytest.mark.integration

NOW = 1_800_000_000_000
TYPE = "script.fifo"
BODY = '{"type":"script.fifo","data":{}}'
LEASE_MS = 30_000
GRACE_MS = 1000
HEALTH = HealthPolicy(disable_after_ms=3_600_000, ops_budget=3)
# The fallback due time of a delivery waiting in a line (common.lua FIFO_WAIT_MS).
FIFO_WAIT_MS = 3_600_000


async def _fifo_endpoint(client: Redis) -> str:
    endpoint_id = await save_endpoint(Scripts(client), TYPE, NOW - 10)
    await _set_ordering(client, endpoint_id, "fifo")
    return endpoint_id


async def _set_ordering(client: Redis, endpoint_id: str, ordering: str) -> None:
    """An update through endpoint_save.lua, as the API makes it: every field it requires."""
    fields: dict[str, str | int] = {
        "url": "http://127.0.0.1:9/x", "event_types": f'["{TYPE}"]', "operations": "0",
        "filter": "", "ordering": ordering, "updated": NOW - 5,
    }  # fmt: skip
    args = EndpointSaveArgs(endpoint_id, 0, fields)
    await Scripts(client).run("endpoint_save", args.keys(), args.argv())


async def _ingest(client: Redis, count: int, *, start: int = 0) -> tuple[list[str], list[str]]:
    """``count`` events, one delivery each: their ids, and those that asked for a wake-up."""
    events = EventStore(client, Scripts(client))
    ids: list[str] = []
    woken: list[str] = []
    for n in range(start, start + count):
        accepted = await events.accept(
            event_id=new_id("msg", NOW + n), event_type=TYPE, body=BODY, key_id="key_1",
            now_ms=NOW + n, budget=2, grace_ms=GRACE_MS, idempotency=None, wakeup=None,
            backlog_max=1_000_000,
        )  # fmt: skip
        ids += accepted.deliveries
        woken += accepted.delivery_ids
    return ids, woken


def _store(client: Redis) -> DeliveryStore:
    return DeliveryStore(client, Scripts(client))


async def _record(
    client: Redis, delivery_id: str, token: str, outcome: AttemptOutcome, *, at: int,
    delay_ms: int | None = None, chain: str | None = None,
) -> Recorded:  # fmt: skip
    code = {AttemptOutcome.OK: 200, AttemptOutcome.FAIL: 500, AttemptOutcome.GONE: 410}[outcome]
    return await _store(client).record(
        delivery_id=delivery_id, token=token, now_ms=at,
        attempt=Attempt(1, at - 5, 5, code, None, ""), outcome=outcome, delay_ms=delay_ms,
        health=HEALTH, next_lease=None if chain is None else NextLease(chain, LEASE_MS, 10),
    )  # fmt: skip


async def _line(client: Redis, endpoint_id: str) -> list[str]:
    return cast(list[str], await client.lrange(keys.fifo(endpoint_id), 0, -1))


async def _due(client: Redis, delivery_id: str) -> float | None:
    score = await client.zscore(keys.due(keys.bucket_of(delivery_id)), delivery_id)
    return None if score is None else float(score)


async def test_only_the_head_is_due_woken_and_leased(client: Redis) -> None:
    endpoint_id = await _fifo_endpoint(client)
    ids, woken = await _ingest(client, 3)

    assert await _line(client, endpoint_id) == ids
    assert woken == ids[:1]  # the others want no wake-up
    assert await _due(client, ids[0]) == NOW + GRACE_MS
    for n, waiting in enumerate(ids[1:], start=1):
        # Still in the due set (app_end.lua scans it), but only as a far fallback.
        assert await _due(client, waiting) == NOW + n + FIFO_WAIT_MS

    leased = await _store(client).lease(ids, "tok", NOW + 10, LEASE_MS, 10)

    assert [job.delivery_id for job in leased.jobs] == ids[:1]
    assert leased.jobs[0].ordered
    assert leased.skipped == {ids[1]: LeaseSkip.QUEUED, ids[2]: LeaseSkip.QUEUED}


async def test_a_head_that_ends_hands_the_line_on_and_a_retry_keeps_its_place(
    client: Redis,
) -> None:
    endpoint_id = await _fifo_endpoint(client)
    ids, _ = await _ingest(client, 3)
    store = _store(client)
    (head,) = (await store.lease(ids[:1], "t1", NOW + 10, LEASE_MS, 10)).jobs
    assert head.ordered

    # A failure with tries left: still the head; the next waits.
    failed = await _record(client, ids[0], "t1", AttemptOutcome.FAIL, at=NOW + 20, delay_ms=500)
    assert failed.status is RecordOutcome.PENDING
    assert await _line(client, endpoint_id) == ids
    assert (await store.lease(ids[1:2], "t2", NOW + 30, LEASE_MS, 10)).skipped == {
        ids[1]: LeaseSkip.QUEUED
    }

    # Its last try fails: it ends, and the record leases the next for the caller at once.
    (again,) = (await store.lease(ids[:1], "t3", NOW + 600, LEASE_MS, 10)).jobs
    assert again.delivery_id == ids[0]
    exhausted = await _record(client, ids[0], "t3", AttemptOutcome.FAIL, at=NOW + 700, chain="t4")

    assert exhausted.status is RecordOutcome.FAILED
    assert exhausted.next is not None
    assert [j.delivery_id for j in exhausted.next.jobs] == ids[1:2]
    assert await _line(client, endpoint_id) == ids[1:]
    assert "fifo" not in await client.hgetall(keys.delivery(ids[0]))

    # Without a caller to lease it, the next head is due now, for the scheduler.
    done = await _record(client, ids[1], "t4", AttemptOutcome.OK, at=NOW + 800)
    assert done.next is None
    assert await _due(client, ids[2]) == NOW + 800
    assert await _line(client, endpoint_id) == ids[2:]


async def test_a_retried_delivery_joins_the_end_of_the_line(client: Redis) -> None:
    endpoint_id = await _fifo_endpoint(client)
    ids, _ = await _ingest(client, 2)
    store = _store(client)
    await store.lease(ids[:1], "t1", NOW + 10, LEASE_MS, 10)
    await _record(client, ids[0], "t1", AttemptOutcome.OK, at=NOW + 20)

    await store.retry(ids[:1], NOW + 30, GRACE_MS)

    assert await _line(client, endpoint_id) == [ids[1], ids[0]]
    assert await _due(client, ids[0]) == NOW + 30 + FIFO_WAIT_MS


async def test_a_disabled_endpoint_takes_its_whole_line_at_once(client: Redis) -> None:
    endpoint_id = await _fifo_endpoint(client)
    ids, _ = await _ingest(client, 4)
    await client.hset(keys.endpoint(endpoint_id), "disabled", "1")

    leased = await _store(client).lease(ids[:1], "t1", NOW + 10, LEASE_MS, 10)

    assert leased.skipped == {ids[0]: LeaseSkip.DISABLED}
    for delivery_id in ids:
        delivery = await client.hgetall(keys.delivery(delivery_id))
        assert delivery["status"] == "disabled"
        assert "fifo" not in delivery
        assert await _due(client, delivery_id) is None
    assert await _line(client, endpoint_id) == []
    assert await client.get(keys.backlog(endpoint_id)) == "0"


@pytest.mark.parametrize("how", ["deleted", "no longer fifo"])
async def test_a_dissolved_line_sends_its_deliveries_as_any_other(client: Redis, how: str) -> None:
    endpoint_id = await _fifo_endpoint(client)
    ids, _ = await _ingest(client, 3)
    await _store(client).lease(ids[:1], "t1", NOW + 10, LEASE_MS, 10)
    head_due = await _due(client, ids[0])

    if how == "deleted":
        args = EndpointDeleteArgs(endpoint_id)
        await Scripts(client).run("endpoint_delete", args.keys(), args.argv())
    else:
        await _set_ordering(client, endpoint_id, "")

    assert not await client.exists(keys.fifo(endpoint_id))
    # The leased head keeps its lease's due entry; the others are due now (server time).
    assert await _due(client, ids[0]) == head_due
    for waiting in ids[1:]:
        assert "fifo" not in await client.hgetall(keys.delivery(waiting))
        score = await _due(client, waiting)
        assert score is not None and score < NOW + FIFO_WAIT_MS
    leased = await _store(client).lease(ids[1:], "t2", NOW + 20, LEASE_MS, 10)
    if how == "deleted":
        assert set(leased.skipped.values()) == {LeaseSkip.FAILED}
    else:
        assert [job.delivery_id for job in leased.jobs] == ids[1:]
        assert not any(job.ordered for job in leased.jobs)


async def test_deliveries_made_before_it_became_fifo_are_in_no_line(client: Redis) -> None:
    endpoint_id = await save_endpoint(Scripts(client), TYPE, NOW - 10)
    before, _ = await _ingest(client, 2)
    await _set_ordering(client, endpoint_id, "fifo")
    after, woken = await _ingest(client, 2, start=2)

    assert await _line(client, endpoint_id) == after
    assert woken == after[:1]
    leased = await _store(client).lease(before + after, "t1", NOW + 10, LEASE_MS, 10)
    assert [job.delivery_id for job in leased.jobs] == [*before, after[0]]
