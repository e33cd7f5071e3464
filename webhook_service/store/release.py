"""Finished work leaves Redis once the log holds it (lua/release.lua).

Redis keeps the work in flight; the SQL log keeps the history. The shipper, having committed
a batch, names what finished in it; each name may leave ``hot_ms`` later, so that what just
finished is still read from Redis for a while (``WEBHOOK_HOT_SECONDS``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from webhook_service.store.scripts import Scripts


@dataclass(frozen=True)
class ReleaseArgs:
    """release.lua's arguments, in the order its head names them."""

    now_ms: int
    hot_ms: int  # how long what is named now stays
    limit: int  # the most due names one call takes
    finished: Sequence[str] = ()  # delivery and event ids the shipper just saw finish

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
    scripts: Scripts, now_ms: int, hot_ms: int, limit: int, finished: Sequence[str] = ()
) -> Released:
    """Name ``finished`` (delivery and event ids), then let go of up to ``limit`` names whose
    time has come: a delivery that is final still, an event with no delivery left."""
    args = ReleaseArgs(now_ms, hot_ms, limit, finished)
    return Released.parse(scripts.run_sync("release", args.argv()))
