"""The due set: deliveries that need a sender now, claimed a batch at a time.

Two callers claim through the one ``claim_due`` script: the scheduler, which publishes
wake-ups for workers, and the tick endpoint, which sends inline. A claim pushes each due
time a grace period ahead, so the next claim, by either, does not take the same delivery
while this one is on its way; the lease then moves it again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from redis.asyncio import Redis

from webhook_service.store import keys
from webhook_service.store.scripts import Scripts


@dataclass(frozen=True)
class ClaimArgs:
    """claim_due.lua's arguments, in the order its head names them."""

    now_ms: int
    limit: int  # the most deliveries one claim takes
    grace_ms: int  # how far each claimed due time moves ahead

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
        """claim_due.lua's reply: one (delivery id, attempts so far) row per claim."""
        return cls(
            fresh=[row[0] for row in rows if row[1] == "0"],
            retries=[row[0] for row in rows if row[1] != "0"],
        )


def claim_due_sync(scripts: Scripts, now_ms: int, limit: int, grace_ms: int) -> Claimed:
    args = ClaimArgs(now_ms, limit, grace_ms)
    return Claimed.parse(scripts.run_sync("claim_due", args.argv()))


async def claim_due(scripts: Scripts, now_ms: int, limit: int, grace_ms: int) -> Claimed:
    args = ClaimArgs(now_ms, limit, grace_ms)
    return Claimed.parse(await scripts.run("claim_due", args.argv()))


async def count_due(redis: Redis, now_ms: int) -> int:
    return int(await redis.zcount(keys.DUE, "-inf", now_ms))
