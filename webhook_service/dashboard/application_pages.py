"""Applications: every one the signed-in key may see (a bound key: its own), each with its
health and volume, summed from its endpoints' stats.

The API has no figures per application, so this page asks for each application's endpoints
and each endpoint's stats, a bounded number of requests at a time: one page of
``PAGE_SIZE`` applications of ``n`` endpoints each costs ``PAGE_SIZE * (1 + n)`` requests
to this very process.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from aiohttp import web

from webhook_service.admin import describe as d
from webhook_service.admin.api import JSON, AdminApi
from webhook_service.client.errors import APIError
from webhook_service.dashboard import charts, figures, layout
from webhook_service.dashboard.access import signed_in
from webhook_service.dashboard.endpoint_pages import HEALTH_BADGE, activity, charts_section
from webhook_service.dashboard.markup import Markup, join, path, render, with_query
from webhook_service.dashboard.places import APPLICATIONS, Place, within
from webhook_service.dashboard.session import Session

PAGE_SIZE = 20
# Requests in flight at once for one page, over all its applications: the API serves the
# people using it meanwhile too.
CONCURRENCY = 16
# An application is as healthy as its least healthy enabled endpoint: worst first.
WORST_FIRST = ("failing", "degraded", "healthy", "idle")
NO_ENDPOINTS = "no endpoints"
BADGES = {**HEALTH_BADGE, NO_ENDPOINTS: "off"}

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


@dataclass(frozen=True)
class Summary:
    endpoints: int
    disabled: int
    # The rest is None when the key lacks deliveries:read (no stats to sum).
    failing: int | None
    health: str | None
    last_hour: Volume | None
    last_day: Volume | None
    backlog: int | None
    # Each endpoint's per-minute figures, for the charts.
    minutes: tuple[figures.Minutes, ...] = ()


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


async def _summary(api: AdminApi, app: JSON, gate: asyncio.Semaphore) -> Summary | None:
    """None: the application was deleted since it was listed."""
    scoped = api.within(app["id"])
    try:
        endpoints = await _limited(gate, scoped.all_endpoints())
    except APIError as exc:
        if exc.status != 404:
            raise
        return None
    try:
        found = await asyncio.gather(*(_stats(scoped, e, gate) for e in endpoints))
    except APIError as exc:
        if exc.status != 403:
            raise
        return summarize(endpoints, None)  # no deliveries:read: the endpoints alone
    kept = [(e, s) for e, s in zip(endpoints, found, strict=True) if s is not None]
    return summarize([e for e, _ in kept], [s for _, s in kept])


def _percent(volume: Volume | None) -> str:
    return d.NOTHING if volume is None else d.percent(volume.success_rate)


def _count(volume: Volume | None) -> str | int:
    return d.NOTHING if volume is None else volume.deliveries


def _maybe(value: int | None) -> str | int:
    return d.NOTHING if value is None else value


def application_row(app: JSON, summary: Summary) -> list[Markup | str | int]:
    place = within(app)
    link = render('<a href="$href" title="$id">$name</a>', href=place.home, id=app["id"],
                  name=app["name"])  # fmt: skip
    health = (
        layout.badge(summary.health, BADGES[summary.health])
        if summary.health is not None
        else d.NOTHING
    )
    spark: Markup | str = d.NOTHING
    if summary.minutes:
        spark = charts.sparkline(
            figures.attempts(summary.minutes), title="attempts per minute, last hour"
        )
    deliveries = render('<a href="$href">deliveries</a>', href=place.path("deliveries"))
    return [
        link,
        render("<code>$uid</code>", uid=app["uid"]) if app["uid"] else d.NOTHING,
        health,
        summary.endpoints,
        summary.disabled,
        _maybe(summary.failing),
        spark,
        _count(summary.last_hour),
        _percent(summary.last_hour),
        _count(summary.last_day),
        _percent(summary.last_day),
        _maybe(summary.backlog),
        deliveries,
    ]


HEADERS = [
    "Application", "Uid", "Health", "Endpoints", "Disabled", "Failing", "Last hour",
    "Hour's deliveries", "Hour's success", "Day's deliveries", "Day's success", "Backlog", "",
]  # fmt: skip


@signed_in
async def applications(
    request: web.Request, session: Session, api: AdminApi, place: Place
) -> web.StreamResponse:
    listed = await api.applications(PAGE_SIZE, request.query.get("cursor") or None)
    gate = asyncio.Semaphore(CONCURRENCY)
    found = await asyncio.gather(*(_summary(api, a, gate) for a in listed["data"]))
    shown = [(a, s) for a, s in zip(listed["data"], found, strict=True) if s is not None]
    table = layout.table(
        HEADERS,
        [application_row(a, s) for a, s in shown],
        "No applications yet: create one with POST /v1/applications or "
        "`webhook-service applications create NAME`.",
    )
    more = Markup("")
    if listed["next_cursor"]:
        more = render(
            '<p><a href="$href">Next page</a></p>',
            href=with_query(path(APPLICATIONS), {"cursor": listed["next_cursor"]}),
        )
    minutes = [m for _, s in shown for m in s.minutes]
    activity_shown = charts_section(activity(minutes)) if minutes else Markup("")
    return layout.page(
        "Applications",
        join([activity_shown, table, more]),
        session,
        place=place,
        active="applications",
    )
