"""The store's per-bucket structures (keys.py: one due set, outbox, release set and metrics
hash a bucket) read whole, for the tests that look at all of them at once."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import cast

import redis
from redis.asyncio import Redis
from redis.typing import EncodableT, FieldT

from webhook_service.store import keys

Entry = tuple[str, dict[str, str]]


async def outbox(client: Redis) -> list[Entry]:
    """Every bucket's outbox entries, a bucket after another (each in its stream's order)."""
    async with client.pipeline(transaction=False) as pipe:
        for bucket in keys.all_buckets():
            pipe.xrange(keys.outbox(bucket))
        parts = cast(list[list[Entry]], await pipe.execute())
    return [entry for part in parts for entry in part]


def outbox_sync(client: redis.Redis) -> list[Entry]:
    with client.pipeline(transaction=False) as pipe:
        for bucket in keys.all_buckets():
            pipe.xrange(keys.outbox(bucket))
        parts = cast(list[list[Entry]], pipe.execute())
    return [entry for part in parts for entry in part]


async def outbox_length(client: Redis) -> int:
    async with client.pipeline(transaction=False) as pipe:
        for bucket in keys.all_buckets():
            pipe.xlen(keys.outbox(bucket))
        return sum(int(n) for n in await pipe.execute())


async def _every_bucket(client: Redis, key_of: Callable[[int], str]) -> dict[str, float]:
    """One sorted set kept per bucket, its every bucket's members merged: member -> score."""
    async with client.pipeline(transaction=False) as pipe:
        for bucket in keys.all_buckets():
            pipe.zrange(key_of(bucket), 0, -1, withscores=True)
        parts = cast(list[list[tuple[str, float]]], await pipe.execute())
    return {member: score for part in parts for member, score in part}


async def due(client: Redis) -> dict[str, float]:
    """Every bucket's due entries: delivery id -> score."""
    return await _every_bucket(client, keys.due)


def due_sync(client: redis.Redis) -> dict[str, float]:
    with client.pipeline(transaction=False) as pipe:
        for bucket in keys.all_buckets():
            pipe.zrange(keys.due(bucket), 0, -1, withscores=True)
        parts = cast(list[list[tuple[str, float]]], pipe.execute())
    return {member: score for part in parts for member, score in part}


async def release(client: Redis) -> dict[str, float]:
    """Every bucket's release set: name -> score."""
    return await _every_bucket(client, keys.release)


async def metrics(client: Redis) -> dict[str, int]:
    """Every bucket's counters added up."""
    async with client.pipeline(transaction=False) as pipe:
        for bucket in keys.all_buckets():
            pipe.hgetall(keys.metrics(bucket))
        parts = cast(list[dict[str, str]], await pipe.execute())
    total: Counter[str] = Counter()
    for fields in parts:
        total.update({name: int(value) for name, value in fields.items()})
    return dict(total)


async def endpoint_of(client: Redis, delivery_id: str) -> str | None:
    """The endpoint a delivery's id tail names, in its bucket's endpoints:seqs."""
    from webhook_service.ids import delivery_tail

    found = await client.hget(keys.endpoint_seqs(keys.bucket_of(delivery_id)),
                              delivery_tail(delivery_id))  # fmt: skip
    return None if found is None else str(found)


async def uid_map(client: Redis) -> dict[str, str]:
    """Every bucket's uid mappings: uid -> application id."""
    async with client.pipeline(transaction=False) as pipe:
        for bucket in keys.all_buckets():
            pipe.hgetall(keys.in_bucket(bucket, "apps_uid"))
        parts = cast(list[dict[str, str]], await pipe.execute())
    return {uid: app for part in parts for uid, app in part.items()}


async def apps(client: Redis) -> list[str]:
    """Every bucket's application ids, in id order (= time)."""
    async with client.pipeline(transaction=False) as pipe:
        for bucket in keys.all_buckets():
            pipe.zrange(keys.apps(bucket), 0, -1)
        parts = cast(list[list[str]], await pipe.execute())
    return sorted(app for part in parts for app in part)


def legacy_layout(client: redis.Redis) -> None:
    """Give every key of the store the name it had before schema 5 (keys.untagged): a store
    the tests write with today's helpers then looks as an older release left it, for
    `webhook-service migrate` to move into buckets. The buckets' uid maps become the one."""
    for name in list(client.scan_iter(match=keys.PREFIX + "{*", count=1000)):
        key = name.decode() if isinstance(name, bytes) else str(name)
        if keys.untagged(key) == keys.LEGACY_APPS_UID:
            mapping = cast(dict[FieldT, EncodableT], client.hgetall(key))
            if mapping:
                client.hset(keys.LEGACY_APPS_UID, mapping=mapping)
            client.delete(key)
        else:
            client.rename(key, keys.untagged(key))
