"""The aiohttp application: middlewares, routes, and how it is wired to Redis."""

from __future__ import annotations

from aiohttp import web

from webhook_service.api import deliveries, endpoints, events, health
from webhook_service.api.auth import auth_middleware
from webhook_service.api.context import SERVICES, Services
from webhook_service.api.problems import problem_middleware


def create_app(svc: Services) -> web.Application:
    # Bodies are read (and capped) by the handlers themselves; this only bounds what
    # aiohttp would buffer on its own.
    app = web.Application(
        middlewares=[problem_middleware, auth_middleware],
        client_max_size=svc.settings.max_payload_bytes + 1024,
    )
    app[SERVICES] = svc
    for module in (health, events, endpoints, deliveries):
        app.add_routes(module.routes)
    return app
