"""How a dashboard page reaches the API: as the signed-in person, over HTTP, to this very
process.

The dashboard holds no privilege of its own. Each page calls the public API with the key
from its session, on the local address the request came in on (the socket's, never the
Host header, which the client chooses), so the key's scopes, the validation and every
check apply exactly as to any other client.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp
from aiohttp import web

from webhook_service.admin.api import AdminApi
from webhook_service.api.body import read_form
from webhook_service.api.problems import REDIS_DOWN_RETRY_AFTER, ProblemError
from webhook_service.client.errors import APIError, TransportError
from webhook_service.dashboard import layout
from webhook_service.dashboard.markup import path
from webhook_service.dashboard.places import Place, place_of
from webhook_service.dashboard.session import (
    CSRF_FIELD,
    Session,
    current,
    end,
    forget,
    same_origin,
    valid_form_token,
)

HTTP = web.AppKey("dashboard_http", aiohttp.ClientSession)
# A page: the request, its session, the API as the signed-in key on the routes of the page's
# place (its application's, or the flat ones), and that place.
View = Callable[[web.Request, Session, AdminApi, Place], Awaitable[web.StreamResponse]]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def http_session(app: web.Application) -> AsyncIterator[None]:
    async with aiohttp.ClientSession() as session:
        app[HTTP] = session
        yield


def own_address(request: web.Request) -> str:
    """This server's own base URL, from the socket the request arrived on."""
    transport = request.transport
    sockname = transport.get_extra_info("sockname") if transport is not None else None
    if not isinstance(sockname, tuple):
        raise web.HTTPServiceUnavailable(text="the dashboard needs a TCP listener")
    host, port = sockname[0], sockname[1]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def api_for(request: web.Request, key: str) -> AdminApi:
    return AdminApi(request.app[HTTP], own_address(request), key)


def redirect(location: str) -> web.Response:
    """303: after a POST the browser GETs the result, so reloading repeats nothing."""
    return web.Response(status=303, headers={"Location": location})


def explain(error: APIError) -> str:
    problem = error.problem
    pointers = "; ".join(f"{e.get('pointer', '')}: {e.get('detail', '')}" for e in problem.errors)
    return f"{problem.detail} {pointers}".strip()


def unavailable(error: APIError) -> ProblemError:
    """The API's 503 (its store refuses, say) is the page's own: a problem document with
    Retry-After, as every route answers then, rather than a page that looks like any other
    error and tells a client nothing about when to come back."""
    problem = error.problem
    kind = problem.kind if problem.kind == "store-unavailable" else None
    return ProblemError(
        503, problem.detail, kind=kind, headers={"Retry-After": REDIS_DOWN_RETRY_AFTER}
    )


def signed_in(view: View) -> Handler:
    """Only with a session; a POST also needs our own origin and the form's token. The view
    gets the API on its place's routes: within an application, every call it makes is the
    nested route's, so a key bound to another application finds nothing (404)."""

    @functools.wraps(view)
    async def handler(request: web.Request) -> web.StreamResponse:
        session = await current(request)
        if session is None:
            return redirect(path("login"))
        if request.method == "POST":
            form = await read_form(request)
            token = form.get(CSRF_FIELD)
            if not same_origin(request) or not valid_form_token(
                session, token if isinstance(token, str) else None
            ):
                return layout.error_page(
                    403, "Refused", "This form did not come from this dashboard.", session
                )
        try:
            api = api_for(request, session.key)
            place = await place_of(request, api)
            return await view(request, session, api.within(place.app), place)
        except APIError as exc:
            if exc.status == 401:
                # Revoked or expired in the meantime: sign in again.
                await end(request, session)
                response = redirect(path("login"))
                forget(response)
                return response
            if exc.status == 503:
                raise unavailable(exc) from exc
            title = exc.problem.title or "Error"
            return layout.error_page(exc.status, title, explain(exc), session)
        except TransportError as exc:
            return layout.error_page(502, "API unreachable", str(exc), session)

    return handler
