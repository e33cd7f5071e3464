"""How a portal page runs: with its session, as that session, on its one application.

Like the dashboard's pages (dashboard/access.py), the portal holds no privilege of its
own: each page calls the public API over HTTP to this very process, with the session's
sealed credential as the bearer key, on ``/v1/applications/{app}/…`` routes only. The API
knows that credential as a portal principal, bound to the application and limited to the
session's capabilities (api/portal_routes.py), so what a page may show or do is decided
there, once, for every client; a page only leaves out the buttons its session could not use.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable

from aiohttp import web

from webhook_service.admin.api import AdminApi
from webhook_service.api.body import read_form
from webhook_service.client.errors import APIError, TransportError
from webhook_service.dashboard.access import Handler, api_for, explain, unavailable
from webhook_service.dashboard.actions import Action
from webhook_service.portal import layout
from webhook_service.portal.layout import Brand
from webhook_service.portal.session import PortalSession, current, valid_form_token

# A page: the request, its session, the API as that session on its application's routes,
# and the application's branding (its record, read first on every page).
PortalView = Callable[[web.Request, PortalSession, AdminApi, Brand], Awaitable[web.StreamResponse]]

_ENDED = (
    "This portal session has ended: its link expired, it was signed out, or access was "
    "withdrawn. Ask the service that sent you the link for a new one."
)


def portal_page(view: PortalView) -> Handler:
    """Only with a live portal session; a POST also needs the session's form token (and,
    as session.valid_form_token checks, our own origin)."""

    @functools.wraps(view)
    async def handler(request: web.Request) -> web.StreamResponse:
        session = await current(request)
        if session is None:
            return layout.signed_out_page(401, "Signed out", _ENDED)
        if request.method == "POST":
            form = await read_form(request)
            if not valid_form_token(request, session, form):
                return layout.signed_out_page(
                    403, "Refused", "This form did not come from this portal."
                )
        api = api_for(request, session.credential).within(session.app_id)
        brand: Brand | None = None
        try:
            brand = Brand(await api.application(session.app_id))
            return await view(request, session, api, brand)
        except APIError as exc:
            if exc.status == 401:
                # Revoked or expired since the session was opened.
                return layout.signed_out_page(401, "Signed out", _ENDED)
            if exc.status == 503:
                raise unavailable(exc) from exc
            if brand is None:
                return layout.signed_out_page(exc.status, "Unavailable", explain(exc))
            return layout.error_page(exc.status, _title(exc), _detail(exc), session, brand)
        except TransportError as exc:
            return layout.signed_out_page(502, "Unavailable", str(exc))

    return handler


def portal_action(action: Action) -> Handler:
    """A button the dashboard has too (dashboard/actions.py) as a portal page: with the
    session, on its application, redirecting within the portal (the brand's place)."""

    @functools.wraps(action)
    async def view(
        request: web.Request, session: PortalSession, api: AdminApi, brand: Brand
    ) -> web.StreamResponse:
        return await action(request, api, brand.place)

    return portal_page(view)


def _title(error: APIError) -> str:
    if error.status == 403:
        return "Not allowed"
    if error.status == 404:
        return "Not found"
    return error.problem.title or "Error"


def _detail(error: APIError) -> str:
    if error.problem.kind == "missing-capability":
        return (
            "Your access to this portal does not include this. "
            f"The service answered: {explain(error)}"
        )
    return explain(error)
