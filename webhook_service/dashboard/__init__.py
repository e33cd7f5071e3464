"""The web dashboard at /dashboard: server-rendered pages over the public API.

Its routes are public as far as the API's key check goes (``api/scopes.py``): each page
checks its own session and then acts with the signed-in person's API key, through the API.
"""

from __future__ import annotations

from importlib.resources import files

from aiohttp import web

from webhook_service.dashboard import (
    application_pages,
    delivery_pages,
    endpoint_editor,
    endpoint_pages,
    event_pages,
    event_type_pages,
    login,
)
from webhook_service.dashboard.access import Handler, http_session
from webhook_service.dashboard.layout import apply_security_headers
from webhook_service.dashboard.places import APPLICATIONS, NESTED_PREFIX, PREFIX

_STATIC = {"dashboard.css": "text/css", "dashboard.js": "text/javascript"}
Route = tuple[str, str, Handler]


def _static(name: str, content_type: str) -> Handler:
    # Two small files, read once: nothing from the request ever names a file.
    text = files("webhook_service.dashboard").joinpath("static", name).read_text()

    async def handler(_: web.Request) -> web.StreamResponse:
        return web.Response(text=text, content_type=content_type, charset="utf-8")

    return handler


def _both(method: str, flat: str, handler: Handler) -> list[Route]:
    """A page's two forms with one handler (as the API's, api/routing.py tenant_route):
    ``/dashboard{flat}`` on the flat API routes and
    ``/dashboard/applications/{app}{flat}`` on the application's (places.py)."""
    return [(method, PREFIX + flat, handler), (method, NESTED_PREFIX + flat, handler)]


ROUTES: list[Route] = [
    *_both("GET", "", endpoint_pages.overview),
    ("GET", f"{PREFIX}/login", login.login_form),
    ("POST", f"{PREFIX}/login", login.login),
    ("POST", f"{PREFIX}/logout", login.logout),
    ("GET", f"{PREFIX}/{APPLICATIONS}", application_pages.applications),
    *_both("GET", "/portal-links", application_pages.portal_links),
    *_both("POST", "/portal-links", application_pages.make_portal_link),
    *_both("POST", "/portal-links/revoke", application_pages.revoke_portal_links),
    # The catalog is global: one page, outside any application.
    ("GET", f"{PREFIX}/event-types", event_type_pages.event_types),
    # Before the endpoint's own page, whose {endpoint_id} would take "new".
    *_both("GET", "/endpoints/new", endpoint_editor.new_endpoint),
    *_both("POST", "/endpoints", endpoint_editor.create_endpoint),
    *_both("GET", "/endpoints/{endpoint_id}", endpoint_pages.endpoint_page),
    *_both("GET", "/endpoints/{endpoint_id}/edit", endpoint_editor.edit_endpoint),
    *_both("POST", "/endpoints/{endpoint_id}/edit", endpoint_editor.update_endpoint),
    *_both("POST", "/endpoints/{endpoint_id}/send-example", endpoint_pages.send_example),
    *_both("POST", "/endpoints/{endpoint_id}/enable", endpoint_pages.enable),
    *_both("POST", "/endpoints/{endpoint_id}/disable", endpoint_pages.disable),
    *_both("POST", "/endpoints/{endpoint_id}/rotate-secret", endpoint_pages.rotate),
    *_both("POST", "/endpoints/{endpoint_id}/recover", endpoint_pages.recover),
    *_both("GET", "/events", event_pages.events),
    *_both("GET", "/events/{event_id}", event_pages.event_page),
    *_both("GET", "/deliveries", delivery_pages.history),
    *_both("POST", "/deliveries/retry", delivery_pages.bulk_retry),
    *_both("GET", "/deliveries/{delivery_id}", delivery_pages.delivery_page),
    *_both("POST", "/deliveries/{delivery_id}/retry", delivery_pages.retry),
    *_both("GET", "/jobs/{job_id}", delivery_pages.job_page),
    *(("GET", f"{PREFIX}/static/{name}", _static(name, kind)) for name, kind in _STATIC.items()),
]


async def _security_headers(request: web.Request, response: web.StreamResponse) -> None:
    if request.path == PREFIX or request.path.startswith(PREFIX + "/"):
        apply_security_headers(response)


def setup(app: web.Application) -> None:
    for method, route_path, handler in ROUTES:
        app.router.add_route(method, route_path, handler)
    app.cleanup_ctx.append(http_session)
    app.on_response_prepare.append(_security_headers)
