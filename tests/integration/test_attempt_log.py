"""The attempt log through the real scripts and the real shipper: attempts go to the SQL log
(the delivery's hash keeps none), and what an attempt makes dead in the hash (the lease,
empty code or error, a finished delivery's next time and budget) is gone."""

from __future__ import annotations

from pathlib import Path

import pytest
from redis.asyncio import Redis

from tests.integration.conftest import save_endpoint
from tests.support.logged import local_log
from webhook_service.embedded import EmbeddedValkey
from webhook_service.ids import new_id
from webhook_service.store import keys
from webhook_service.store.deliveries import (
    Attempt,
    AttemptOutcome,
    DeliveryStore,
    HealthPolicy,
    RetryOutcome,
)
from webhook_service.store.events import EventStore
from webhook_service.store.scripts import Scripts

pytestmark = pytest.mark.integration

NOW = 1_800_000_000_000
HEALTH = HealthPolicy(disable_after_ms=3_600_000, ops_budget=3)
OK, FAIL = AttemptOutcome.OK, AttemptOutcome.FAIL
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
    store: DeliveryStore, delivery_id: str, number: int, outcome: AttemptOutcome, body: str, at: int
) -> str:
    lease = await store.lease([delivery_id], "tok", at, 30_000, 10)
    assert [job.attempt for job in lease.jobs] == [number], lease.skipped
    code = 200 if outcome is AttemptOutcome.OK else None
    attempt = Attempt(number, at, 12, code, None if code else "timeout", body)
    recorded = await store.record(
        delivery_id=delivery_id, token="tok", now_ms=at, attempt=attempt, outcome=outcome,
        delay_ms=None if outcome is AttemptOutcome.OK else 0, health=HEALTH,
    )  # fmt: skip
    return recorded.status


async def test_attempts_go_to_the_log_and_what_they_make_dead_leaves_the_hash(
    client: Redis, tmp_path: Path, valkey: EmbeddedValkey
) -> None:
    scripts = Scripts(client)
    store = DeliveryStore(client, scripts)
    delivery_id = await _delivery(client, scripts)
    key = keys.delivery(delivery_id)
    long_body = "x" * 4096
    async with local_log(tmp_path, valkey.url) as log:
        assert await _attempt(store, delivery_id, 1, FAIL, "", NOW + 1) == "pending"
        raw = await client.hgetall(key)
        # Still pending: its next time and budget stay; the lease and the empty code go.
        assert {"next_at", "budget", "error"} <= set(raw)
        assert not {"lease", "lease_until", "code"} & set(raw)

        assert await _attempt(store, delivery_id, 2, FAIL, long_body, NOW + 2) == "pending"
        assert await _attempt(store, delivery_id, 3, OK, "fine", NOW + 3) == "succeeded"
        raw = await client.hgetall(key)
        assert not {"lease", "lease_until", "error", "next_at", "budget"} & set(raw)
        assert raw["code"] == "200"
        # The attempts are the log's alone: none in the hash.
        assert not [f for f in map(str, raw) if f.startswith("a") and f[1:].isdigit()]
        # The hash kept its compact encoding, the long body notwithstanding.
        assert await client.object("encoding", key) == "listpack"

        log.ship()
        (record,) = await store.get_many([delivery_id, "dlv_missing"])
        assert (record.last_code, record.last_error) == (200, None)
        assert record.next_at_ms is None and record.attempts == 3
        attempts = await log.reader.attempt_log(record)
        assert [(a.number, a.status_code, a.error, a.response_body) for a in attempts] == [
            (1, None, "timeout", ""), (2, None, "timeout", long_body), (3, 200, None, "fine"),
        ]  # fmt: skip

        # A retry brings the next time and the budget back, and the next attempt is the 4th.
        assert (await store.retry([delivery_id], NOW + 4, 0)).outcomes == [RetryOutcome.OK]
        raw = await client.hgetall(key)
        assert (raw["next_at"], raw["budget"], raw["status"]) == (str(NOW + 4), "4", "pending")
        (record,) = await store.get_many([delivery_id])
        assert record.next_at_ms == NOW + 4
        assert await _attempt(store, delivery_id, 4, OK, "", NOW + 5) == "succeeded"
        log.ship()
        (record,) = await store.get_many([delivery_id])
        assert [a.number for a in await log.reader.attempt_log(record)] == [1, 2, 3, 4]


def test_attempt_json_leaves_out_what_is_empty() -> None:
    bare = Attempt(1, NOW, 7, None, None, "")
    assert bare.to_json() == f'{{"n":1,"t":{NOW},"d":7}}'
    assert Attempt.from_json(bare.to_json()) == bare
    full = Attempt(2, NOW, 7, 500, "x", "body")
    assert Attempt.from_json(full.to_json()) == full
    # As written before: every key, nulls and all.
    legacy = f'{{"n":3,"t":{NOW},"d":1,"c":null,"e":"timeout","b":""}}'
    assert Attempt.from_json(legacy) == Attempt(3, NOW, 1, None, "timeout", "")
