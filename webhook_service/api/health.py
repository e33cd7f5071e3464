"""GET /healthz: the process is alive and answering (no auth, no Redis)."""

from __future__ import annotations

from aiohttp import web

routes = web.RouteTableDef()


@routes.get("/healthz")
async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})
