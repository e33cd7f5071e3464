"""GET /healthz (alive: no auth, no Redis) and GET /readyz (fit to take traffic)."""

from __future__ import annotations

from aiohttp import web

from webhook_service.api.context import services
from webhook_service.store.liveness import Bounds, evaluate, server_facts
from webhook_service.timeutil import now_ms

routes = web.RouteTableDef()


@routes.get("/healthz")
async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


@routes.get("/readyz")
async def readyz(request: web.Request) -> web.Response:
    """Redis answers with AOF on and noeviction, a worker beat within 30 s, the scheduler
    passes in time (neither in tick mode), and the log's backlog is below its cap; 503
    naming what fails otherwise. A lagging log is named but leaves the answer 200. No key
    needed."""
    svc = services(request)
    checks = evaluate(await server_facts(svc.redis), now_ms(), Bounds.of(svc.settings))
    ready = all(check.ok for check in checks)
    return web.json_response(
        {
            "status": "ready" if ready else "unready",
            "checks": {
                c.name: {"ok": c.ok, "state": c.state.value, "detail": c.detail} for c in checks
            },
        },
        status=200 if ready else 503,
    )
