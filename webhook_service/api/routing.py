"""The two forms of every subscriber route: flat (``/v1/endpoints…``) and nested under its
application (``/v1/applications/{app}/endpoints…``), one handler for both (api/tenancy.py
says which application each form acts on)."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from webhook_service.api.problems import Handler

# What the nested form puts before a flat route's path after /v1.
NESTED_PREFIX = "/v1/applications/{app}"


def nested_path(flat: str) -> str:
    """``/v1/endpoints/{endpoint_id}`` -> ``/v1/applications/{app}/endpoints/{endpoint_id}``."""
    assert flat.startswith("/v1/"), flat
    return NESTED_PREFIX + flat[len("/v1") :]


def flat_path(route_path: str) -> str:
    """The flat form of a route path, which names its scope (scopes.py); others unchanged."""
    if route_path.startswith(NESTED_PREFIX + "/"):
        return "/v1" + route_path[len(NESTED_PREFIX) :]
    return route_path


def tenant_route(routes: web.RouteTableDef, method: str, flat: str) -> Callable[[Handler], Handler]:
    """Register one handler under the flat path and under its application's."""

    def register(handler: Handler) -> Handler:
        routes.route(method, flat)(handler)
        routes.route(method, nested_path(flat))(handler)
        return handler

    return register
