"""Retention: what is older than ``WEBHOOK_RETENTION_DAYS`` goes, a bounded slice per pass.

The scheduler calls ``trim`` on every pass; trim.lua walks the events oldest first from a
cursor kept in Redis and stops after ``budget`` deliveries, so one pass never holds Redis
for long however much has expired, and the work spreads over passes. Pending deliveries
are never deleted, and keep their event.
"""

from __future__ import annotations

from dataclasses import dataclass

from webhook_service.ids import id_bound
from webhook_service.store.scripts import Scripts

DAY_MS = 86_400_000
# Deliveries one pass may examine: a few milliseconds of Redis time.
TRIM_BUDGET = 500


@dataclass(frozen=True)
class Trimmed:
    events: int
    deliveries: int


def _trim_args(now_ms: int, retention_days: float, budget: int) -> list[str | int | float]:
    cutoff = now_ms - int(retention_days * DAY_MS)
    # The smallest id of the cutoff millisecond: everything below it was made before.
    return [id_bound("msg", cutoff, upper=False), id_bound("dlv", cutoff, upper=False), budget]


def trim(
    scripts: Scripts, now_ms: int, retention_days: float, budget: int = TRIM_BUDGET
) -> Trimmed:
    reply = scripts.run_sync("trim", _trim_args(now_ms, retention_days, budget))
    return Trimmed(int(reply[0]), int(reply[1]))


async def trim_async(
    scripts: Scripts, now_ms: int, retention_days: float, budget: int = TRIM_BUDGET
) -> Trimmed:
    """The same slice from an event loop: the tick endpoint does the scheduler's work too."""
    reply = await scripts.run("trim", _trim_args(now_ms, retention_days, budget))
    return Trimmed(int(reply[0]), int(reply[1]))
