"""The due sets: deliveries that need a sender now, claimed a batch at a time.

Each bucket has its own (keys.due), so that claiming is a step within one bucket; a claim
across the store first counts what is due in each bucket (one round trip of ZCOUNTs, which
is all an idle store costs a pass), then claims from the buckets that have some, sharing
the limit out among them (``shares``), in a second round trip.

Two callers claim through the one ``claim_due`` script: a scheduler, which publishes
wake-ups for workers and claims from the buckets it holds the lease of
(store/bucket_leases.py), and the tick endpoint, which sends inline and claims from all.
A claim pushes each due time a grace period ahead, so the next claim, by either, does not
take the same delivery while this one is on its way; the lease then moves it again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

import redis
from redis.asyncio import Redis

from webhook_service.store import keys
from webhook_service.store.scripts import Scripts


@dataclass(frozen=True)
class ClaimArgs:
    """claim_due.lua's arguments, in the order its head names them."""

    bucket: int  # whose due set (KEYS[1])
    now_ms: int
    limit: int  # the most deliveries one claim takes
    grace_ms: int  # how far each claimed due time moves ahead

    def keys(self) -> list[str]:
        return [keys.due(self.bucket)]

    def argv(self) -> list[str | int | float]:
        return [self.now_ms, self.limit, self.grace_ms]


@dataclass(frozen=True)
class Claimed:
    fresh: list[str]  # never attempted: they go to the first-attempt queue
    retries: list[str]

    @property
    def ids(self) -> list[str]:
        return self.fresh + self.retries

    def __len__(self) -> int:
        return len(self.fresh) + len(self.retries)

    @classmethod
    def parse(cls, rows: Sequence[Sequence[str]]) -> Claimed:
        """claim_due.lua's reply: one (delivery id, attempts so far) row per claim (the
        replies of several buckets' calls, one after the other: a bucket's ids stay
        together, so a wake-up of them is mostly one lease call)."""
        return cls(
            fresh=[row[0] for row in rows if row[1] == "0"],
            retries=[row[0] for row in rows if row[1] != "0"],
        )


def shares(due: Mapping[int, int], limit: int) -> dict[int, int]:
    """How many each bucket with deliveries due may hand out, ``limit`` in all: every
    bucket its due count if they fit, else the same share each, a bucket with fewer due
    leaving the rest of its share to the others."""
    waiting = sorted((count, bucket) for bucket, count in due.items() if count > 0)
    out: dict[int, int] = {}
    left = limit
    for n, (count, bucket) in enumerate(waiting):
        share = min(count, left // (len(waiting) - n))
        if share > 0:
            out[bucket] = share
            left -= share
    return out


def _counting(
    pipe: redis.client.Pipeline | redis.asyncio.client.Pipeline,
    now_ms: int,
    buckets: Iterable[int],
) -> None:
    for bucket in buckets:
        pipe.zcount(keys.due(bucket), "-inf", now_ms)


def claim_due_sync(
    scripts: Scripts,
    now_ms: int,
    limit: int,
    grace_ms: int,
    buckets: Collection[int] | None = None,
) -> Claimed:
    """What is due in ``buckets`` (a scheduler's: those it holds the lease of), up to
    ``limit``; every bucket when None (the tick's)."""
    chosen = sorted(keys.all_buckets() if buckets is None else buckets)
    with scripts.sync_client.pipeline(transaction=False) as pipe:
        _counting(pipe, now_ms, chosen)
        counts = pipe.execute()
    calls = [
        ClaimArgs(bucket, now_ms, share, grace_ms)
        for bucket, share in shares(dict(zip(chosen, counts, strict=True)), limit).items()
    ]
    replies = scripts.run_many_sync("claim_due", [(a.keys(), a.argv()) for a in calls])
    return Claimed.parse([row for reply in replies for row in reply])


async def claim_due(scripts: Scripts, now_ms: int, limit: int, grace_ms: int) -> Claimed:
    async with scripts.async_client.pipeline(transaction=False) as pipe:
        _counting(pipe, now_ms, keys.all_buckets())
        counts = await pipe.execute()
    calls = [
        ClaimArgs(bucket, now_ms, share, grace_ms)
        for bucket, share in shares(dict(enumerate(counts)), limit).items()
    ]
    replies = await asyncio.gather(*(scripts.run("claim_due", a.keys(), a.argv()) for a in calls))
    return Claimed.parse([row for reply in replies for row in reply])


async def count_due(redis: Redis, now_ms: int) -> int:
    async with redis.pipeline(transaction=False) as pipe:
        _counting(pipe, now_ms, keys.all_buckets())
        return sum(int(n) for n in await pipe.execute())
