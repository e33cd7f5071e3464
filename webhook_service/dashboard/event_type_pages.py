"""Event types: the catalog (``GET /v1/event-types``, global: every application's), each type
as the subscriber portal shows it (dashboard/catalog.py ``card``: its description, group,
deprecation, and its schema and example folded), the archived ones apart when asked for.
"""

from __future__ import annotations

from aiohttp import web

from webhook_service.admin.api import JSON, AdminApi
from webhook_service.dashboard import layout
from webhook_service.dashboard.access import signed_in
from webhook_service.dashboard.catalog import card
from webhook_service.dashboard.markup import Markup, join, path, render, with_query
from webhook_service.dashboard.places import Place
from webhook_service.dashboard.session import Session

EVENT_TYPES = "event-types"
PAGE_SIZE = 50


def _cards(types: list[JSON]) -> Markup:
    return render('<ul class="catalog">$items</ul>', items=join(card(t) for t in types))


@signed_in
async def event_types(
    request: web.Request, session: Session, api: AdminApi, place: Place
) -> web.StreamResponse:
    archived = request.query.get("archived") == "1"
    listed = await api.event_types(
        PAGE_SIZE, request.query.get("cursor") or None, include_archived=archived
    )
    types: list[JSON] = listed["data"]
    current = [t for t in types if not t["archived"]]
    gone = [t for t in types if t["archived"]]
    here = path(EVENT_TYPES)
    toggle = render(
        '<p><a href="$href">$label</a></p>',
        href=here if archived else with_query(here, {"archived": "1"}),
        label="Leave out the archived types" if archived else "Show the archived types too",
    )
    parts = [
        render(
            "<p>The types producers send and subscribers choose from, the same for every "
            "application. Change them with <code>webhook-service event-types</code> or "
            "<code>/v1/event-types</code>.</p>"
        ),
        toggle,
        _cards(current)
        if current
        else render('<p class="empty">No event types in the catalog yet.</p>'),
    ]
    if gone:
        parts.append(
            render(
                "<h2>Archived</h2><p>No longer offered to subscribers; events of these types "
                "are not checked against their schemas.</p>$cards",
                cards=_cards(gone),
            )
        )
    parts.append(
        layout.next_page(here, {"archived": "1" if archived else ""}, listed["next_cursor"])
    )
    return layout.page("Event types", join(parts), session, place=place, active=EVENT_TYPES)
