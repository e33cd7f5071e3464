"""A subscriber's endpoints: the list with each one's health, one endpoint with its
charts, recent messages and what the session may do to it.

Each button is drawn only for a session holding its capability; the API checks the same
capability again on every call (a form posted anyway gets the API's 403).
"""

from __future__ import annotations

from aiohttp import web

from webhook_service.admin import describe as d
from webhook_service.admin.api import JSON, AdminApi
from webhook_service.dashboard import catalog
from webhook_service.dashboard import layout as dashboard_layout
from webhook_service.dashboard.access import redirect
from webhook_service.dashboard.delivery_pages import delivery_headers, delivery_rows
from webhook_service.dashboard.endpoint_pages import (
    endpoint_charts,
    endpoint_facts,
    endpoint_list,
    example_form,
    recover_form,
    rotate_form,
    start_example,
    start_recovery,
    switch_endpoint,
    toggle_button,
)
from webhook_service.dashboard.markup import Markup, join, render, with_query
from webhook_service.portal import layout
from webhook_service.portal.layout import Brand
from webhook_service.portal.place import path
from webhook_service.portal.session import PortalSession
from webhook_service.portal.views import portal_action, portal_page
from webhook_service.portal_access import Capability

RECENT = 10


def _add_link(session: PortalSession) -> Markup:
    if Capability.MANAGE_ENDPOINTS not in session.capabilities:
        return Markup("")
    return render(
        '<p><a class="button primary" href="$href">Add an endpoint</a></p>',
        href=path("endpoints", "new"),
    )


@portal_page
async def overview(
    request: web.Request, session: PortalSession, api: AdminApi, brand: Brand
) -> web.StreamResponse:
    empty = "You have no endpoints yet." + (
        " Add one to start receiving events."
        if Capability.MANAGE_ENDPOINTS in session.capabilities
        else ""
    )
    found = await endpoint_list(request, api, brand.place, empty)
    return layout.page(
        "Endpoints",
        join([_add_link(session), found.table, found.charts]),
        session,
        brand,
        active="endpoints",
        note=layout.notice(request),
    )


def _actions(endpoint: JSON, types: list[JSON], session: PortalSession) -> Markup:
    here = path("endpoints", endpoint["id"])
    held = session.capabilities
    parts: list[Markup] = []
    if Capability.MANAGE_ENDPOINTS in held:
        parts.append(render('<a class="button" href="$h">Edit</a>', h=here + "/edit"))
        parts.append(toggle_button(here, endpoint, session))
        parts.append(
            dashboard_layout.post_button(
                here + "/delete", "Delete", session, css="danger",
                confirm="Delete this endpoint? Nothing more is sent to it.",
            )
        )  # fmt: skip
    if Capability.SEND_EXAMPLES in held:
        parts.append(example_form(here, endpoint, types, session))
    if Capability.VIEW_SECRETS in held:
        parts.append(dashboard_layout.post_button(here + "/secret", "Reveal secret", session))
    if Capability.ROTATE_SECRETS in held:
        parts.append(rotate_form(here, session))
    if Capability.RETRY in held:
        parts.append(recover_form(here, session))
    if not parts:
        return Markup("")
    return render('<section class="actions">$parts</section>', parts=join(parts))


@portal_page
async def endpoint_page(
    request: web.Request, session: PortalSession, api: AdminApi, brand: Brand
) -> web.StreamResponse:
    endpoint_id = request.match_info["endpoint_id"]
    endpoint = await api.endpoint(endpoint_id)
    stats = await api.stats(endpoint_id)
    recent = await api.deliveries({"endpoint_id": endpoint_id, "limit": RECENT})
    types = (
        await catalog.event_types(api) if Capability.SEND_EXAMPLES in session.capabilities else []
    )
    messages = path("deliveries")
    links = render(
        '<p><a href="$every">All its messages</a> · <a href="$failed">Its failed messages</a></p>',
        every=with_query(messages, {"endpoint_id": endpoint_id}),
        failed=with_query(messages, {"endpoint_id": endpoint_id, "status": "failed"}),
    )
    history = dashboard_layout.table(
        delivery_headers(brand.place),
        delivery_rows(brand.place, recent["data"]),
        "Nothing sent to it yet.",
    )
    body = join(
        [
            endpoint_facts(endpoint, stats),
            _actions(endpoint, types, session),
            render("<h2>Recent messages</h2>"),
            history,
            links,
            endpoint_charts(stats),
            render("<h2>Last hour and day</h2>"),
            dashboard_layout.table(list(d.WINDOW_TITLES), list(d.windows(stats)), ""),
        ]
    )
    return layout.page(
        endpoint.get("description") or endpoint["id"],
        body,
        session,
        brand,
        active="endpoints",
        trail=[("Endpoints", path())],
        note=layout.notice(request),
    )


enable = portal_action(switch_endpoint(True))
disable = portal_action(switch_endpoint(False))


@portal_page
async def delete(
    request: web.Request, session: PortalSession, api: AdminApi, brand: Brand
) -> web.StreamResponse:
    await api.delete_endpoint(request.match_info["endpoint_id"])
    return redirect(path() + "?done=deleted")


recover = portal_action(start_recovery)


send_example = portal_action(start_example)
