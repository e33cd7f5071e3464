"""A button's work, written once for the dashboard and the portal: what a POST asks of the
API and where the browser goes next, given only the API on the page's routes and the page's
place (a dashboard place, or the portal's, portal/place.py).

What the two differ in is who may press it, which their own wrappers check: the dashboard's
signed-in key (``dashboard_action`` here, around ``access.signed_in``) and the portal's
session (portal/views.py ``portal_action``).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable

from aiohttp import web

from webhook_service.admin.api import AdminApi
from webhook_service.dashboard.access import Handler, signed_in
from webhook_service.dashboard.places import Place
from webhook_service.dashboard.session import Session

# The request (its path names the record), the API on the place's routes, and the place,
# whose pages the answer redirects to.
Action = Callable[[web.Request, AdminApi, Place], Awaitable[web.StreamResponse]]


def dashboard_action(action: Action) -> Handler:
    """``action`` as a dashboard page: signed in, within the place its URL names."""

    @functools.wraps(action)
    async def view(
        request: web.Request, session: Session, api: AdminApi, place: Place
    ) -> web.StreamResponse:
        return await action(request, api, place)

    return signed_in(view)
