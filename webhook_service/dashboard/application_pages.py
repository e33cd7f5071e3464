"""Applications: every one the signed-in key may see (a bound key: its own), each with its
health and volume, summed from its endpoints' stats (admin/application_health.py, which
the command line's ``applications list`` shares): one page of ``PAGE_SIZE`` applications
of ``n`` endpoints each costs ``PAGE_SIZE * (1 + n)`` requests to this very process.
"""

from __future__ import annotations

from aiohttp import web

from webhook_service.admin import describe as d
from webhook_service.admin.api import JSON, AdminApi
from webhook_service.admin.application_health import (
    NO_ENDPOINTS,
    Summary,
    endpoint_cells,
    summaries,
    volume_cells,
)
from webhook_service.dashboard import charts, figures, layout
from webhook_service.dashboard.access import signed_in
from webhook_service.dashboard.endpoint_pages import HEALTH_BADGE, activity, charts_section
from webhook_service.dashboard.markup import Markup, join, path, render, with_query
from webhook_service.dashboard.places import APPLICATIONS, Place, within
from webhook_service.dashboard.session import Session

PAGE_SIZE = 20
BADGES = {**HEALTH_BADGE, NO_ENDPOINTS: "off"}


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
        *endpoint_cells(summary),
        spark,
        *volume_cells(summary),
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
    found = await summaries(api, listed["data"])
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
