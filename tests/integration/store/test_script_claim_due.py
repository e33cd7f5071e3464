"""claim_due.lua through claim_due and claim_due_sync, on a real Valkey: ClaimArgs in,
Claimed out (fresh deliveries apart from retries), and the due set as the script leaves it:
what it handed out a grace period on, what had left Redis dropped, what is not due yet as it
was; a claim across the buckets shares its limit out among those with deliveries due."""

from __future__ import annotations

import pytest
import redis
from redis.asyncio import Redis

from webhook_service.ids import new_id
from webhook_service.store import keys
from webhook_service.store.due import ClaimArgs, Claimed, claim_due, claim_due_sync, shares
from webhook_service.store.scripts import Scripts

pytestmark = pytest.mark.integration

NOW, GRACE = 1_700_000_000_000, 5_000
DUE = keys.due(0)  # ids of mark 0 (the default's, as new_id makes them unless told)


async def _due(client: Redis, at: int, attempts: int | None, mark: int = 0) -> str:
    """A delivery due at ``at`` with this many attempts so far; None: no longer in Redis."""
    delivery_id = new_id("dlv", NOW, mark=mark)
    if attempts is not None:
        await client.hset(keys.delivery(delivery_id), "attempts", attempts)
    await client.zadd(keys.due(keys.bucket_of(delivery_id)), {delivery_id: at})
    return delivery_id


def test_the_args_are_the_bucket_the_time_the_limit_then_the_grace() -> None:
    assert ClaimArgs(3, NOW, 10, GRACE).argv() == [NOW, 10, GRACE]
    assert ClaimArgs(3, NOW, 10, GRACE).keys() == [keys.due(3)]


def test_the_limit_is_shared_out_among_the_buckets_with_some_due() -> None:
    assert shares({0: 5, 1: 0, 2: 3}, 100) == {0: 5, 2: 3}
    # Too many: the same share each, one with fewer leaving the rest to the others.
    assert shares({0: 100, 1: 2, 2: 100}, 10) == {1: 2, 0: 4, 2: 4}
    assert shares({b: 10 for b in range(8)}, 4) == {4: 1, 5: 1, 6: 1, 7: 1}
    assert shares({}, 10) == {} and shares({0: 0}, 10) == {}


async def test_a_claim_splits_fresh_from_retries_and_pushes_them_on(client: Redis) -> None:
    fresh = await _due(client, NOW - 3, 0)
    gone = await _due(client, NOW - 2, None)
    retry = await _due(client, NOW - 1, 2)
    later = await _due(client, NOW + 1, 0)

    claimed = await claim_due(Scripts(client), NOW, 10, GRACE)
    assert claimed == Claimed(fresh=[fresh], retries=[retry])
    assert (claimed.ids, len(claimed)) == ([fresh, retry], 2)
    # The one whose delivery has left Redis is dropped.
    assert await client.zcard(DUE) == 3
    assert await client.zmscore(DUE, [later, fresh, retry]) == [
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
    assert await client.zscore(DUE, second) == NOW - 1
    # The script's own answer: a row of (id, attempts so far) per claim.
    args = ClaimArgs(0, NOW, 1, GRACE)
    assert scripts.run_sync("claim_due", args.keys(), args.argv()) == [[second, "0"]]


async def test_a_claim_across_buckets_takes_from_each_one_with_some_due(client: Redis) -> None:
    mine = [await _due(client, NOW - 10 + n, 0, mark=5) for n in range(6)]
    theirs = [await _due(client, NOW - 5 + n, 1, mark=70) for n in range(2)]  # bucket 6
    assert {keys.bucket_of(i) for i in mine} == {5} and keys.bucket_of(theirs[0]) == 6

    claimed = await claim_due(Scripts(client), NOW, 4, GRACE)

    # Bucket 6 has 2 due, so bucket 5 gets the other 2 of the 4; each bucket's earliest.
    assert claimed == Claimed(fresh=mine[:2], retries=theirs)
    assert await client.zscore(keys.due(5), mine[2]) == NOW - 8
