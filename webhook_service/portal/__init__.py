"""The subscriber portal at /portal: one application's endpoints, messages and signing
secrets, for the people who receive its webhooks, server-rendered like the dashboard.

A person arrives with a link the operator made (POST /v1/applications/{app}/portal-access),
which enter.py exchanges for a portal session (session.py). Every page then acts as that
session through the public API (views.py), so the API alone decides what it may see and do.

Its routes are public as far as the API's key check goes (``api/scopes.py``): each page
checks its own session.
"""

from __future__ import annotations

from importlib.resources import files

from aiohttp import web

from webhook_service.dashboard.access import Handler
from webhook_service.portal import (
    catalog,
    delivery_pages,
    endpoint_form,
    endpoint_pages,
    enter,
    secret_pages,
    verify_page,
)
from webhook_service.portal.layout import security_headers
from webhook_service.portal.place import PREFIX

_STATIC = {"portal.css": "text/css", "portal.js": "text/javascript"}
_ENDPOINT = PREFIX + "/endpoints/{endpoint_id}"
_DELIVERY = PREFIX + "/deliveries/{delivery_id}"


def _static(name: str, content_type: str) -> Handler:
    # Two small files, read once: nothing from the request ever names a file.
    text = files("webhook_service.portal").joinpath("static", name).read_text()

    async def handler(_: web.Request) -> web.StreamResponse:
        return web.Response(text=text, content_type=content_type, charset="utf-8")

    return handler


ROUTES: list[tuple[str, str, Handler]] = [
    ("GET", PREFIX, endpoint_pages.overview),
    # Before the endpoint's own page, whose {endpoint_id} would take "new".
    ("GET", PREFIX + "/endpoints/new", endpoint_form.new_endpoint),
    ("POST", PREFIX + "/endpoints", endpoint_form.create_endpoint),
    ("GET", _ENDPOINT, endpoint_pages.endpoint_page),
    ("GET", _ENDPOINT + "/edit", endpoint_form.edit_endpoint),
    ("POST", _ENDPOINT + "/edit", endpoint_form.update_endpoint),
    ("POST", _ENDPOINT + "/enable", endpoint_pages.enable),
    ("POST", _ENDPOINT + "/disable", endpoint_pages.disable),
    ("POST", _ENDPOINT + "/delete", endpoint_pages.delete),
    ("POST", _ENDPOINT + "/recover", endpoint_pages.recover),
    ("POST", _ENDPOINT + "/send-example", endpoint_pages.send_example),
    ("POST", _ENDPOINT + "/secret", secret_pages.reveal),
    ("POST", _ENDPOINT + "/rotate-secret", secret_pages.rotate),
    ("GET", PREFIX + "/deliveries", delivery_pages.history),
    ("GET", _DELIVERY, delivery_pages.delivery_page),
    ("GET", _DELIVERY + "/attempts", delivery_pages.attempts_fragment),
    ("POST", _DELIVERY + "/retry", delivery_pages.retry),
    ("GET", PREFIX + "/jobs/{job_id}", delivery_pages.job_page),
    ("GET", PREFIX + "/event-types", catalog.catalog_page),
    ("GET", PREFIX + "/verify", verify_page.verify_page),
    *(("GET", f"{PREFIX}/static/{name}", _static(name, kind)) for name, kind in _STATIC.items()),
]


async def _security_headers(request: web.Request, response: web.StreamResponse) -> None:
    """Every portal answer gets the strict headers but a page, which has set its own
    (framing by its application's origins, its logo and accent)."""
    inside = request.path == PREFIX or request.path.startswith(PREFIX + "/")
    if inside and "Content-Security-Policy" not in response.headers:
        response.headers.update(security_headers(None))


def setup(app: web.Application) -> None:
    """The whole portal: its entry and sign-out (enter.py), its pages and the headers of
    every portal answer. Its pages call the API through the dashboard's HTTP client
    (dashboard.setup makes it)."""
    enter.add_routes(app)
    for method, route_path, handler in ROUTES:
        app.router.add_route(method, route_path, handler)
    app.on_response_prepare.append(_security_headers)
