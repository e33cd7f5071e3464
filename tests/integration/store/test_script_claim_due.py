"""claim_due.lua through claim_due and claim_due_sync, on a real Valkey: ClaimArgs in,
Claimed out (fresh deliveries apart from retries), and the due set as the script leaves it:
what it handed out a grace period on, what had left Redis dropped, what is not due yet as it
was."""

from __future__ import annotations

import pytest
import redis
from redis.asyncio import Redis

from webhook_service.ids import new_id
from webhook_service.store import keys
from webhook_service.store.due import ClaimArgs, Claimed, claim_due, claim_due_sync
from webhook_service.store.scripts import Scripts

pytestmark = pytest.mark.integration

NOW, GRACE = 1_700_000_000_000, 5_000


async def _due(client: Redis, at: int, attempts: int | None) -> str:
    """A delivery due at ``at`` with this many attempts so far; None: no longer in Redis."""
    delivery_id = new_id("dlv", NOW)
    if attempts is not None:
        await client.hset(keys.delivery(delivery_id), "attempts", attempts)
    await client.zadd(keys.DUE, {delivery_id: at})
    return delivery_id


def test_the_args_are_the_time_the_limit_then_the_grace() -> None:
    assert ClaimArgs(NOW, 10, GRACE).argv() == [NOW, 10, GRACE]


async def test_a_claim_splits_fresh_from_retries_and_pushes_them_on(client: Redis) -> None:
    fresh = await _due(client, NOW - 3, 0)
    gone = await _due(client, NOW - 2, None)
    retry = await _due(client, NOW - 1, 2)
    later = await _due(client, NOW + 1, 0)

    claimed = await claim_due(Scripts(client), NOW, 10, GRACE)
    assert claimed == Claimed(fresh=[fresh], retries=[retry])
    assert (claimed.ids, len(claimed)) == ([fresh, retry], 2)
    # The one whose delivery has left Redis is dropped.
    assert await client.zcard(keys.DUE) == 3
    assert await client.zmscore(keys.DUE, [later, fresh, retry]) == [
        NOW + 1, NOW + GRACE, NOW + GRACE,
    ]  # fmt: skip
    assert not await client.exists(keys.delivery(gone))
    # Pushed on: the next claim at the same time takes none of them.
    assert len(await claim_due(Scripts(client), NOW, 10, GRACE)) == 0


async def test_a_claim_takes_at_most_its_limit_earliest_first(
    client: Redis, sync_redis: redis.Redis
) -> None:
    first = await _due(client, NOW - 2, 1)
    second = await _due(client, NOW - 1, 0)
    scripts = Scripts(sync_redis)
    assert claim_due_sync(scripts, NOW, 1, GRACE) == Claimed(fresh=[], retries=[first])
    assert await client.zscore(keys.DUE, second) == NOW - 1
    # The script's own answer: a row of (id, attempts so far) per claim.
    assert scripts.run_sync("claim_due", ClaimArgs(NOW, 1, GRACE).argv()) == [[second, "0"]]
