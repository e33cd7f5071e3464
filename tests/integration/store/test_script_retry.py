"""retry.lua through its wrapper (DeliveryStore.retry, RetryArgs, Retried): a finished
delivery pending again, one on its way already left alone, one Redis does not hold, and
what each left in Redis."""

from __future__ import annotations

import json
from typing import cast

import pytest
from redis.asyncio import Redis

from tests.integration.conftest import save_endpoint
from tests.support import buckets
from webhook_service.ids import new_id
from webhook_service.store import keys
from webhook_service.store.deliveries import (
    Attempt,
    AttemptOutcome,
    DeliveryStore,
    HealthPolicy,
    Retried,
    RetryOutcome,
)
from webhook_service.store.events import EventStore
from webhook_service.store.scripts import Scripts

pytestmark = pytest.mark.integration

NOW = 1_800_000_000_000
AT = NOW + 100  # when the admin retries
GRACE_MS = 1000
TYPE = "script.retry"
HEALTH = HealthPolicy(disable_after_ms=3_600_000, ops_budget=3)


async def _delivery(client: Redis) -> str:
    """A pending delivery of a new event to the one endpoint."""
    accepted = await EventStore(client, Scripts(client)).accept(
        event_id=new_id("msg", NOW), event_type=TYPE, body="{}", key_id="key_1", now_ms=NOW,
        budget=3, grace_ms=GRACE_MS, idempotency=None, wakeup=None, backlog_max=1_000_000,
    )  # fmt: skip
    (delivery_id,) = accepted.delivery_ids
    return delivery_id


async def _finish(store: DeliveryStore, delivery_id: str, outcome: AttemptOutcome) -> None:
    """One attempt and no more: succeeded, or failed for good."""
    leased = await store.lease([delivery_id], "tok", NOW + 10, 30_000, 10)
    assert leased.jobs, leased.skipped
    code = 200 if outcome is AttemptOutcome.OK else 500
    await store.record(
        delivery_id=delivery_id, token="tok", now_ms=NOW + 20,
        attempt=Attempt(1, NOW + 10, 5, code, None, ""), outcome=outcome, delay_ms=None,
        health=HEALTH,
    )  # fmt: skip


async def _hash(client: Redis, delivery_id: str) -> dict[str, str]:
    return cast(dict[str, str], await client.hgetall(keys.delivery(delivery_id)))


@pytest.mark.parametrize("outcome", [AttemptOutcome.OK, AttemptOutcome.FAIL])
async def test_ok_makes_a_finished_delivery_pending_with_one_more_try(
    client: Redis, outcome: AttemptOutcome
) -> None:
    endpoint_id = await save_endpoint(Scripts(client), TYPE, NOW - 10)
    store = DeliveryStore(client, Scripts(client))
    delivery_id = await _delivery(client)
    await _finish(store, delivery_id, outcome)
    assert await client.get(keys.backlog(endpoint_id)) == "0"
    outbox = await buckets.outbox_length(client)

    retried = await store.retry([delivery_id], AT, GRACE_MS)

    assert retried == Retried([RetryOutcome.OK])
    delivery = await _hash(client, delivery_id)
    assert (delivery["status"], delivery["attempts"], delivery["budget"]) == ("pending", "1", "2")
    assert (delivery["next_at"], delivery["updated"]) == (str(AT), str(AT))
    # The API wakes it at once; its due entry is the net should that wake-up be lost.
    assert await client.zscore(keys.due(keys.bucket_of(delivery_id)), delivery_id) == AT + GRACE_MS
    assert await client.get(keys.backlog(endpoint_id)) == "1"
    entries = cast(
        list[tuple[str, dict[str, str]]], await client.xrange(keys.outbox(0), min="-", max="+")
    )
    ((_, fields),) = entries[outbox:]
    state = json.loads(fields[keys.OutboxField.STATE])
    assert (state["d"], state["s"], state["n"], state["na"]) == (delivery_id, "pending", 1, AT)


async def test_pending_is_left_alone_and_missing_is_told_per_id_in_order(
    client: Redis,
) -> None:
    await save_endpoint(Scripts(client), TYPE, NOW - 10)
    store = DeliveryStore(client, Scripts(client))
    delivery_id = await _delivery(client)
    before = await _hash(client, delivery_id)
    outbox = await buckets.outbox_length(client)

    retried = await store.retry(["dlv_nothere", delivery_id], AT, GRACE_MS)

    assert retried == Retried([RetryOutcome.MISSING, RetryOutcome.PENDING])
    assert await _hash(client, delivery_id) == before
    assert await client.zscore(keys.due(keys.bucket_of(delivery_id)), delivery_id) == NOW + GRACE_MS
    assert not await client.exists(keys.delivery("dlv_nothere"))
    assert await buckets.outbox_length(client) == outbox


async def test_no_ids_have_no_outcomes(client: Redis) -> None:
    assert await DeliveryStore(client, Scripts(client)).retry([], AT, GRACE_MS) == Retried([])
