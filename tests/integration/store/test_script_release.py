"""release.lua through release(), on a real Valkey: ReleaseArgs in, Released out (how many
deliveries and events left), and what stays: a delivery pending again, an event one of
whose deliveries is still in Redis, a name whose time has not come. How the shipper names
what finished is tests/integration/history/test_release.py's."""

from __future__ import annotations

import pytest
import redis
from redis.asyncio import Redis

from webhook_service.ids import delivery_id, new_id
from webhook_service.store import keys
from webhook_service.store.release import ReleaseArgs, Released, release
from webhook_service.store.scripts import Scripts

pytestmark = pytest.mark.integration

NOW, HOT = 1_700_000_000_000, 60_000


async def _event(client: Redis, statuses: list[str], mark: int = 0) -> tuple[str, list[str]]:
    """An event with one delivery in each status (its live count theirs), as ingest and
    record leave them: each delivery's id starts with its event's body (and its mark)."""
    event_id = new_id("msg", NOW, mark=mark)
    deliveries = [delivery_id(event_id, "ep_x", seq) for seq in range(1, len(statuses) + 1)]
    await client.hset(keys.event(event_id), mapping={"type": "t", "live": len(deliveries)})
    for d, status in zip(deliveries, statuses, strict=True):
        await client.hset(keys.delivery(d), mapping={"status": status, "attempts": 1})
    return event_id, deliveries


def test_the_args_are_the_time_the_window_the_limit_then_the_names() -> None:
    args = ReleaseArgs(3, NOW, HOT, 10, ["dlv_a", "msg_b"])
    assert args.argv() == [NOW, HOT, 10, "dlv_a", "msg_b"]
    assert args.keys() == [keys.release(3)]  # the bucket's release set
    assert ReleaseArgs(0, NOW, HOT, 10).argv() == [NOW, HOT, 10]


async def test_a_final_delivery_leaves_and_its_event_with_the_last_one(
    client: Redis, sync_redis: redis.Redis
) -> None:
    scripts = Scripts(sync_redis)
    event_id, (done, pending) = await _event(client, ["succeeded", "pending"])

    assert release(scripts, NOW, 0, 10, [done, pending]) == Released(deliveries=1, events=0)
    assert not await client.exists(keys.delivery(done))
    # Pending (an admin's retry since): it stays, and is named again when it finishes.
    assert await client.hget(keys.delivery(pending), "status") == "pending"
    assert await client.hget(keys.event(event_id), "live") == "1"
    assert not await client.exists(keys.release(0))

    await client.hset(keys.delivery(pending), "status", "failed")
    assert release(scripts, NOW, 0, 10, [pending]) == Released(deliveries=1, events=1)
    assert not await client.exists(keys.delivery(pending), keys.event(event_id))


async def test_an_event_no_one_took_leaves_by_its_own_name(
    client: Redis, sync_redis: redis.Redis
) -> None:
    event_id, _ = await _event(client, [])
    assert release(Scripts(sync_redis), NOW, 0, 10, [event_id]) == Released(0, 1)
    assert not await client.exists(keys.event(event_id))


async def test_names_wait_out_the_hot_window_and_go_a_limit_at_a_time(
    client: Redis, sync_redis: redis.Redis
) -> None:
    scripts = Scripts(sync_redis)
    _, (first,) = await _event(client, ["failed"])
    _, (second,) = await _event(client, ["failed"])

    assert release(scripts, NOW, HOT, 10, [first, second]) == Released(0, 0)
    assert await client.zcard(keys.release(0)) == 2
    assert await client.zmscore(keys.release(0), [first, second]) == [NOW + HOT, NOW + HOT]
    # The script's own answer: {deliveries, events}, integers.
    args = ReleaseArgs(0, NOW + HOT, 0, 1)
    assert scripts.run_sync("release", args.keys(), args.argv()) == [1, 1]
    assert await client.zcard(keys.release(0)) == 1
    assert release(scripts, NOW + HOT, 0, 1) == Released(1, 1)
    assert not await client.exists(keys.release(0), keys.delivery(first), keys.delivery(second))


async def test_each_bucket_lets_go_of_its_own(client: Redis, sync_redis: redis.Redis) -> None:
    scripts = Scripts(sync_redis)
    _, (here,) = await _event(client, ["failed"])
    _, (there,) = await _event(client, ["failed"], mark=70)  # bucket 6
    assert (keys.bucket_of(here), keys.bucket_of(there)) == (0, 6)

    assert release(scripts, NOW, HOT, 10, [here, there]) == Released(0, 0)
    assert await client.zrange(keys.release(6), 0, -1) == [there]
    assert release(scripts, NOW + HOT, 0, 10) == Released(2, 2)
    assert not await client.exists(keys.delivery(here), keys.delivery(there))
