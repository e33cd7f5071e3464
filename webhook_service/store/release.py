"""Finished work leaves Redis once the log holds it (lua/release.lua), a bucket a call.

Redis keeps the work in flight; the SQL log keeps the history. The shipper, having committed
a batch, names what finished in it; each name may leave ``hot_ms`` later, so that what just
finished is still read from Redis for a while (``WEBHOOK_HOT_SECONDS``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from webhook_service.store import keys
from webhook_service.store.scripts import Scripts


@dataclass(frozen=True)
class ReleaseArgs:
    """release.lua's arguments, in the order its head names them."""

    bucket: int  # whose release set (KEYS[1]); the names are of it
    now_ms: int
    hot_ms: int  # how long what is named now stays
    limit: int  # the most due names one call takes
    finished: Sequence[str] = ()  # delivery and event ids the shipper just saw finish

    def keys(self) -> list[str]:
        return [keys.release(self.bucket)]

    def argv(self) -> list[str | int | float]:
        return [self.now_ms, self.hot_ms, self.limit, *self.finished]


@dataclass(frozen=True)
class Released:
    deliveries: int
    events: int

    @classmethod
    def parse(cls, reply: Sequence[int]) -> Released:
        """release.lua's reply: {deliveries released, events released}, integers."""
        deliveries, events = reply
        return cls(deliveries, events)


def release(
    scripts: Scripts,
    now_ms: int,
    hot_ms: int,
    limit: int,
    finished: Sequence[str] = (),
    buckets: Iterable[int] | None = None,
) -> Released:
    """Name ``finished`` (delivery and event ids), then let go of up to ``limit`` names a
    bucket whose time has come, in ``buckets`` (a scheduler's: those it holds the lease
    of; every bucket when None) and the buckets of ``finished``: a delivery that is final
    still, an event with no delivery left. Only the buckets with names to add, or due, are
    called (one round trip of ZCOUNTs finds them: all an idle store costs)."""
    named = keys.by_bucket(finished)
    client = scripts.sync_client
    polled = sorted(set(keys.all_buckets() if buckets is None else buckets) | set(named))
    with client.pipeline(transaction=False) as pipe:
        for bucket in polled:
            pipe.zcount(keys.release(bucket), "-inf", now_ms)
        due = dict(zip(polled, pipe.execute(), strict=True))
    calls = [
        ReleaseArgs(bucket, now_ms, hot_ms, limit, named.get(bucket, ()))
        for bucket in polled
        if bucket in named or int(due[bucket])
    ]
    replies = scripts.run_many_sync("release", [(a.keys(), a.argv()) for a in calls])
    parsed = [Released.parse(r) for r in replies]
    return Released(sum(r.deliveries for r in parsed), sum(r.events for r in parsed))
