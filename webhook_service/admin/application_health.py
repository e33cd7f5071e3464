"""One application's health and volume, summed from its endpoints' stats: what the
dashboard's Applications page and ``webhook-service applications list`` / ``show`` say of
each application, made in one place so both say the same.

The API has no figures per application, so this asks for each application's endpoints and
each endpoint's stats, a bounded number of requests at a time: ``n`` applications of ``m``
endpoints each cost ``n * (1 + m)`` requests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from webhook_service.admin import describe as d
from webhook_service.admin.api import JSON, AdminApi
from webhook_service.client.errors import APIError

# Requests in flight at once for one listing, over all its applications: the API serves the
# people using it meanwhile too.
CONCURRENCY = 16
# An application is as healthy as its least healthy enabled endpoint: worst first.
WORST_FIRST = ("failing", "degraded", "healthy", "idle")
NO_ENDPOINTS = "no endpoints"
# One endpoint's per_minute list (60 entries, oldest first), as the stats route gives it.
Minutes = Sequence[dict[str, Any]]

T = TypeVar("T")


@dataclass(frozen=True)
class Volume:
    """Deliveries finished in a window, over an application's endpoints."""

    succeeded: int
    failed: int

    @property
    def deliveries(self) -> int:
        return self.succeeded + self.failed

    @property
    def success_rate(self) -> float | None:
        return self.succeeded / self.deliveries if self.deliveries else None

    def as_json(self) -> JSON:
        return {
            "deliveries": self.deliveries,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "success_rate": self.success_rate,
        }


@dataclass(frozen=True)
class Summary:
    # None when the key lacks endpoints:read (nothing to count).
    endpoints: int | None
    disabled: int | None
    # The rest is None also when the key lacks deliveries:read (no stats to sum).
    failing: int | None
    health: str | None
    last_hour: Volume | None
    last_day: Volume | None
    backlog: int | None
    # Each endpoint's per-minute figures, for the dashboard's charts.
    minutes: tuple[Minutes, ...] = ()

    def as_json(self) -> JSON:
        """The figures for ``--json``: every key always there, null where the key may not
        see it (the per-minute figures stay out: 60 entries an endpoint)."""
        return {
            "status": self.health,
            "endpoints": self.endpoints,
            "disabled": self.disabled,
            "failing": self.failing,
            "last_hour": None if self.last_hour is None else self.last_hour.as_json(),
            "last_day": None if self.last_day is None else self.last_day.as_json(),
            "backlog": self.backlog,
        }


# What a key without endpoints:read may know of an application's health: nothing.
UNSEEN = Summary(None, None, None, None, None, None, None)


def _volume(stats: Sequence[JSON], window: str) -> Volume:
    return Volume(
        sum(s[window]["succeeded"] for s in stats), sum(s[window]["failed"] for s in stats)
    )


def summarize(endpoints: Sequence[JSON], stats: Sequence[JSON] | None) -> Summary:
    """One application's figures from its endpoints and their stats (same order)."""
    disabled = sum(1 for e in endpoints if e["disabled"])
    if stats is None:
        health = NO_ENDPOINTS if not endpoints else None
        return Summary(len(endpoints), disabled, None, health, None, None, None)
    words = [d.health(e, s) for e, s in zip(endpoints, stats, strict=True)]
    enabled = [w for w in words if w != "disabled"]
    if not endpoints:
        health = NO_ENDPOINTS
    elif not enabled:
        health = "disabled"
    else:
        health = min(enabled, key=WORST_FIRST.index)
    return Summary(
        endpoints=len(endpoints),
        disabled=disabled,
        failing=words.count("failing"),
        health=health,
        last_hour=_volume(stats, "last_hour"),
        last_day=_volume(stats, "last_day"),
        backlog=sum(s["backlog"] for s in stats),
        minutes=tuple(s["per_minute"] for s in stats),
    )


async def _limited(gate: asyncio.Semaphore, call: Awaitable[T]) -> T:
    async with gate:
        return await call


async def _stats(api: AdminApi, endpoint: JSON, gate: asyncio.Semaphore) -> JSON | None:
    """An endpoint's stats; None: it was deleted since it was listed."""
    try:
        return await _limited(gate, api.stats(endpoint["id"]))
    except APIError as exc:
        if exc.status != 404:
            raise
        return None


async def summary(api: AdminApi, app_id: str, gate: asyncio.Semaphore | None = None) -> Summary:
    """One application's figures, as much of them as the key may see, ``gate`` bounding
    its requests in flight (by default to CONCURRENCY). The API's 404 when the application
    is not there (or no longer)."""
    gate = gate or asyncio.Semaphore(CONCURRENCY)
    scoped = api.within(app_id)
    try:
        endpoints = await _limited(gate, scoped.all_endpoints())
    except APIError as exc:
        if exc.status != 403:
            raise
        return UNSEEN
    try:
        found = await asyncio.gather(*(_stats(scoped, e, gate) for e in endpoints))
    except APIError as exc:
        if exc.status != 403:
            raise
        return summarize(endpoints, None)  # no deliveries:read: the endpoints alone
    kept = [(e, s) for e, s in zip(endpoints, found, strict=True) if s is not None]
    return summarize([e for e, _ in kept], [s for _, s in kept])


async def summaries(
    api: AdminApi, applications: Sequence[JSON], concurrency: int = CONCURRENCY
) -> list[Summary | None]:
    """Each listed application's figures, in order; None: it was deleted since it was
    listed."""
    gate = asyncio.Semaphore(concurrency)

    async def one(app: JSON) -> Summary | None:
        try:
            return await summary(api, app["id"], gate)
        except APIError as exc:
            if exc.status != 404:
                raise
            return None

    return list(await asyncio.gather(*(one(a) for a in applications)))


# How the figures read, in the order both the dashboard's columns and the CLI's take them.


def _maybe(value: int | None) -> str | int:
    return d.NOTHING if value is None else value


def word(summary: Summary) -> str:
    return summary.health or d.NOTHING


def endpoint_cells(summary: Summary) -> list[str | int]:
    """Endpoints, disabled, failing."""
    return [_maybe(summary.endpoints), _maybe(summary.disabled), _maybe(summary.failing)]


def volume_cells(summary: Summary) -> list[str | int]:
    """The last hour's deliveries and success rate, the last day's, and the backlog."""
    cells: list[str | int] = []
    for volume in (summary.last_hour, summary.last_day):
        if volume is None:
            cells += [d.NOTHING, d.NOTHING]
        else:
            cells += [volume.deliveries, d.percent(volume.success_rate)]
    return [*cells, _maybe(summary.backlog)]
