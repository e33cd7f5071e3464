"""GET /v1/endpoints/{id}/stats: an endpoint's recent deliveries, latency and backlog."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from webhook_service.api.context import services
from webhook_service.api.endpoints import load_endpoint
from webhook_service.api.routing import tenant_route
from webhook_service.store.stats import Window, endpoint_stats
from webhook_service.timeutil import iso, now_ms

routes = web.RouteTableDef()


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def window_json(window: Window) -> dict[str, Any]:
    return {
        "deliveries": window.deliveries,
        "succeeded": window.succeeded,
        "failed": window.failed,
        "success_rate": _rounded(window.success_rate, 4),
        "attempts": window.attempts,
        "attempts_succeeded": window.attempts_succeeded,
        "attempt_success_rate": _rounded(window.attempt_success_rate, 4),
        "latency_ms": {
            "p50": _rounded(window.latency_ms(0.5), 1),
            "p95": _rounded(window.latency_ms(0.95), 1),
        },
    }


def _at(ms: int | None) -> str | None:
    return None if ms is None else iso(ms)


@tenant_route(routes, "GET", "/v1/endpoints/{endpoint_id}/stats")
async def stats(request: web.Request) -> web.Response:
    svc = services(request)
    endpoint_id = (await load_endpoint(svc, request)).id
    found = await endpoint_stats(svc.redis, endpoint_id, now_ms())
    return web.json_response(
        {
            "endpoint_id": endpoint_id,
            "last_hour": window_json(found.last_hour),
            "last_day": window_json(found.last_day),
            "per_minute": [
                {"start": iso(start), **window_json(window)} for start, window in found.minutes
            ],
            "backlog": found.backlog,
            "last_success_at": _at(found.last_success_ms),
            "last_failure": None
            if found.last_failure_ms is None
            else {
                "at": iso(found.last_failure_ms),
                "status_code": found.last_failure_code,
                "error": found.last_failure_error,
            },
        }
    )
