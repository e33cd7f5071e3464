"""The event-type catalog page of the portal: every type a subscriber may receive, each as
a card (dashboard/catalog.py, which the endpoint form's choices share).
"""

from __future__ import annotations

from aiohttp import web

from webhook_service.admin.api import AdminApi
from webhook_service.dashboard.catalog import card, event_types
from webhook_service.dashboard.catalog import pretty as pretty  # the portal's message page's
from webhook_service.dashboard.markup import join, render
from webhook_service.portal import layout
from webhook_service.portal.layout import Brand
from webhook_service.portal.session import PortalSession
from webhook_service.portal.views import portal_page


@portal_page
async def catalog_page(
    request: web.Request, session: PortalSession, api: AdminApi, brand: Brand
) -> web.StreamResponse:
    catalog = await event_types(api)
    intro = render(
        "<p>These are the events we can send you. Each one arrives as a POST of JSON "
        '<code>{"type", "timestamp", "data"}</code>; the schema says what '
        "<code>data</code> holds.</p>"
    )
    listed = (
        render('<ul class="catalog">$items</ul>', items=join(card(t) for t in catalog))
        if catalog
        else render('<p class="empty">No event types are described yet.</p>')
    )
    return layout.page("Event types", join([intro, listed]), session, brand, active="event-types")
