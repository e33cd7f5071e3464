"""The attempt log on a real Valkey, through the real scripts: attempts live in their
delivery's hash (a{n}), one too long for it in the overflow list, and what an attempt makes
dead (the lease, empty code or error, a finished delivery's next time and budget) is gone."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from tests.integration.conftest import save_endpoint
from webhook_service.ids import new_id
from webhook_service.store import keys
from webhook_service.store.deliveries import Attempt, DeliveryStore, HealthPolicy, Outcome
from webhook_service.store.events import EventStore
from webhook_service.store.scripts import Scripts

pytestmark = pytest.mark.integration

NOW = 1_800_000_000_000
HEALTH = HealthPolicy(disable_after_ms=3_600_000, ops_budget=3)
TYPE = "log.made"


async def _delivery(client: Redis, scripts: Scripts, budget: int = 3) -> str:
    await save_endpoint(scripts, TYPE, NOW)
    accepted = await EventStore(client, scripts).accept(
        event_id=new_id("msg", NOW), event_type=TYPE, body="{}", key_id="key_1", now_ms=NOW,
        budget=budget, grace_ms=1000, idempotency=None, wakeup=None, backlog_max=1_000_000,
    )  # fmt: skip
    (delivery_id,) = accepted.delivery_ids
    return delivery_id


async def _attempt(
    store: DeliveryStore, delivery_id: str, number: int, outcome: Outcome, body: str, at: int
) -> str:
    lease = await store.lease([delivery_id], "tok", at, 30_000, 10)
    assert [job.attempt for job in lease.jobs] == [number], lease.skipped
    code = 200 if outcome == "ok" else None
    attempt = Attempt(number, at, 12, code, None if code else "timeout", body)
    recorded = await store.record(
        delivery_id=delivery_id, token="tok", now_ms=at, attempt=attempt, outcome=outcome,
        delay_ms=None if outcome == "ok" else 0, health=HEALTH,
    )  # fmt: skip
    return recorded.status


async def test_attempts_live_in_the_hash_and_long_ones_overflow(client: Redis) -> None:
    scripts = Scripts(client)
    store = DeliveryStore(client, scripts)
    delivery_id = await _delivery(client, scripts)
    key = keys.delivery(delivery_id)
    long_body = "x" * keys.ATTEMPT_FIELD_MAX

    assert await _attempt(store, delivery_id, 1, "fail", "", NOW + 1) == "pending"
    raw = await client.hgetall(key)
    assert raw[keys.attempt_field(1)] == Attempt(1, NOW + 1, 12, None, "timeout", "").to_json()
    # Still pending: its next time and budget stay; the lease and the empty code go.
    assert {"next_at", "budget", "error"} <= set(raw)
    assert not {"lease", "lease_until", "code"} & set(raw)
    assert not await client.exists(keys.attempts(delivery_id))

    assert await _attempt(store, delivery_id, 2, "fail", long_body, NOW + 2) == "pending"
    assert keys.attempt_field(2) not in await client.hgetall(key)
    assert await client.llen(keys.attempts(delivery_id)) == 1
    # The hash kept its compact encoding.
    assert await client.object("encoding", key) == "listpack"

    assert await _attempt(store, delivery_id, 3, "ok", "fine", NOW + 3) == "succeeded"
    raw = await client.hgetall(key)
    assert not {"lease", "lease_until", "error", "next_at", "budget"} & set(raw)
    assert raw["code"] == "200"
    log = await store.attempts(delivery_id)
    assert [(a.number, a.status_code, a.error, a.response_body) for a in log] == [
        (1, None, "timeout", ""), (2, None, "timeout", long_body), (3, 200, None, "fine"),
    ]  # fmt: skip
    record = await store.get(delivery_id)
    assert record is not None and (record.last_code, record.last_error) == (200, None)
    assert record.next_at_ms is None and record.attempts == 3
    assert await store.get_many([delivery_id, "dlv_missing"]) == [record]

    # A retry brings the next time and the budget back, and the next attempt is a4.
    assert await store.retry([delivery_id], NOW + 4, 0) == ["ok"]
    raw = await client.hgetall(key)
    assert (raw["next_at"], raw["budget"], raw["status"]) == (str(NOW + 4), "4", "pending")
    record = await store.get(delivery_id)
    assert record is not None and record.next_at_ms == NOW + 4
    assert await _attempt(store, delivery_id, 4, "ok", "", NOW + 5) == "succeeded"
    assert [a.number for a in await store.attempts(delivery_id)] == [1, 2, 3, 4]


async def test_a_log_written_before_the_fold_still_reads(client: Redis) -> None:
    """Data written when every attempt went to the list reads the same."""
    scripts = Scripts(client)
    store = DeliveryStore(client, scripts)
    delivery_id = await _delivery(client, scripts)
    old = [Attempt(n, NOW + n, 5, 503, None, "busy") for n in (1, 2)]
    await client.rpush(keys.attempts(delivery_id), *(a.to_json() for a in old))
    await client.hset(keys.delivery(delivery_id), "attempts", 2)
    assert await _attempt(store, delivery_id, 3, "ok", "", NOW + 3) == "succeeded"
    log = await store.attempts(delivery_id)
    assert log[:2] == old and [a.number for a in log] == [1, 2, 3]


def test_attempt_json_leaves_out_what_is_empty() -> None:
    bare = Attempt(1, NOW, 7, None, None, "")
    assert bare.to_json() == f'{{"n":1,"t":{NOW},"d":7}}'
    assert Attempt.from_json(bare.to_json()) == bare
    full = Attempt(2, NOW, 7, 500, "x", "body")
    assert Attempt.from_json(full.to_json()) == full
    # As written before: every key, nulls and all.
    legacy = f'{{"n":3,"t":{NOW},"d":1,"c":null,"e":"timeout","b":""}}'
    assert Attempt.from_json(legacy) == Attempt(3, NOW, 1, None, "timeout", "")
    assert keys.attempt_number(keys.attempt_field(12)) == 12
    assert keys.attempt_number("attempts") is None and keys.attempt_number("a0") is None
