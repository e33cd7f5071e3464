"""The aiohttp application: middlewares, routes, and how it is wired to Redis."""

from __future__ import annotations

from aiohttp import web

from webhook_service import dashboard, portal
from webhook_service.api import (
    apikeys,
    applications,
    cron,
    deliveries,
    endpoint_filters,
    endpoints,
    event_history,
    event_types,
    events,
    health,
    jobs,
    metrics,
    portal_access,
    response_counts,
    stats,
)
from webhook_service.api.auth import auth_middleware
from webhook_service.api.context import SERVICES, Services
from webhook_service.api.limits import (
    IN_FLIGHT,
    InFlight,
    header_limits_middleware,
    key_concurrency_middleware,
    parser_limits,
)
from webhook_service.api.metrics import rejection_middleware
from webhook_service.api.problems import problem_middleware
from webhook_service.api.response_counts import response_count_middleware


def create_app(svc: Services) -> web.Application:
    # Bodies are read (whole, capped and timed) by the handlers themselves (api/body.py);
    # this only bounds what aiohttp would buffer on its own.
    app = web.Application(
        middlewares=[
            response_count_middleware,
            problem_middleware,
            header_limits_middleware,
            rejection_middleware,
            auth_middleware,
            key_concurrency_middleware,
        ],
        client_max_size=svc.settings.max_payload_bytes + 1024,
        handler_args=parser_limits(svc.settings),
    )
    app[SERVICES] = svc
    app[IN_FLIGHT] = InFlight(svc.settings.key_concurrency)
    for module in (health, events, endpoints, deliveries, jobs, cron, apikeys, applications):
        app.add_routes(module.routes)
    for module in (event_history, event_types, stats, metrics, portal_access):
        app.add_routes(module.routes)
    jobs.setup(app, svc)
    response_counts.setup(app, svc)
    event_types.setup(app, svc)
    endpoint_filters.setup(app, svc.endpoints)
    app.cleanup_ctx.append(cron.ticker_context)
    dashboard.setup(app)
    portal.setup(app)
    return app
