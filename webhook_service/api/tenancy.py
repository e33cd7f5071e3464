"""Which application a request acts on (the routes' two forms are api/routing.py).

Every subscriber resource lives under its application, ``/v1/applications/{app}/…``, where
``{app}`` is the application's id or its uid. The flat routes (``/v1/endpoints…``,
``POST /v1/events``, …) are the same handlers, registered once more: with no application in
the path they act on the caller's, the one its key is bound to, or else the default one, so
a single-tenant deployment never names an application at all.

A key bound to an application is answered 404 for everything of every other application,
never 403: a 403 would tell it which ids exist.
"""

from __future__ import annotations

from aiohttp import web

from webhook_service.api.auth import CALLER
from webhook_service.api.context import Services, services
from webhook_service.api.problems import ProblemError
from webhook_service.store.applications import DEFAULT_APP_ID, DEFAULT_APP_UID

APP_NOT_FOUND = "No application has this id or uid."


def not_found() -> ProblemError:
    return ProblemError(404, APP_NOT_FOUND)


def bound_application(request: web.Request) -> str | None:
    """The application the caller's key is bound to; None: the operator's key sees all."""
    return request[CALLER].application


def path_application(request: web.Request) -> str | None:
    """The application segment as sent (an id or a uid); None on a flat route."""
    return request.match_info.get("app")


async def resolve(svc: Services, request: web.Request, raw: str) -> str:
    """The id of the application ``raw`` (an id or a uid) names, if the caller may see it.
    The default application is there before its first endpoint or event: made on its
    first mention."""
    found = await svc.applications.resolve(raw)
    if found is None and raw in (DEFAULT_APP_ID, DEFAULT_APP_UID):
        found = await svc.applications.ensure_default()
    bound = bound_application(request)
    if found is None or (bound is not None and found.id != bound):
        raise not_found()
    return found.id


async def home_application(request: web.Request) -> str:
    """The application the request acts on: the path's, else the key's, else the default."""
    raw = path_application(request)
    if raw is None:
        return bound_application(request) or DEFAULT_APP_ID
    return await resolve(services(request), request, raw)


async def visible_application(request: web.Request) -> str | None:
    """The one application whose records the request may see, or None for every one: an
    operator's key on a flat route (GET /v1/events/{id} reads any event)."""
    if path_application(request) is not None:
        return await home_application(request)
    return bound_application(request)


async def ensure_live(svc: Services, application: str | None, problem: ProblemError) -> None:
    """Raise ``problem`` for a record of an application deleted since: its deletion job
    purges it, and a retry or a replay must not send anything of it meanwhile."""
    if application is not None and await svc.applications.get(application) is None:
        raise problem


def ensure_visible(scope: str | None, application: str | None, problem: ProblemError) -> None:
    """Raise ``problem`` (the route's own 404) when a record of ``application`` lies outside
    ``scope`` (visible_application): it is answered as if it did not exist."""
    if scope is not None and application != scope:
        raise problem
