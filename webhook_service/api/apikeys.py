"""API keys: create (the key is shown once), list, revoke. Admin scope only (scopes.py)."""

from __future__ import annotations

from aiohttp import web

from webhook_service.api.body import read_model
from webhook_service.api.context import Services, services
from webhook_service.api.models import ApiKeyIn, api_key_json
from webhook_service.api.pagination import page_params
from webhook_service.api.problems import ProblemError
from webhook_service.api.scopes import Scope
from webhook_service.timeutil import now_ms

routes = web.RouteTableDef()


@routes.post("/v1/api-keys")
async def create_api_key(request: web.Request) -> web.Response:
    svc = services(request)
    body = await read_model(request, ApiKeyIn, svc.settings.max_payload_bytes)
    application = None
    if body.application is not None:
        application = await _binding(svc, body.application, body.scopes)
    record, key = await svc.api_keys.create(
        body.name, body.scopes, body.rate_limit, now_ms(), application
    )
    return web.json_response({**api_key_json(record), "key": key}, status=201)


async def _binding(svc: Services, named: str, scopes: list[Scope]) -> str:
    """The id of the application a new key is bound to. Such a key may not be an admin:
    admin manages API keys and sees every application."""
    if Scope.ADMIN in scopes:
        raise ProblemError(
            422,
            "A key bound to an application cannot have the admin scope.",
            errors=[{"pointer": "/scopes", "detail": "admin is for keys of no application"}],
        )
    found = await svc.applications.resolve(named)
    if found is None:
        raise ProblemError(
            422,
            "No application has this id or uid.",
            errors=[{"pointer": "/application", "detail": "no such application"}],
        )
    return found.id


@routes.get("/v1/api-keys")
async def list_api_keys(request: web.Request) -> web.Response:
    svc = services(request)
    limit, cursor = page_params(request)
    records, next_cursor = await svc.api_keys.page(limit, cursor)
    return web.json_response(
        {"data": [api_key_json(r) for r in records], "next_cursor": next_cursor}
    )


@routes.delete("/v1/api-keys/{key_id}")
async def delete_api_key(request: web.Request) -> web.Response:
    if not await services(request).api_keys.delete(request.match_info["key_id"]):
        raise ProblemError(404, "No API key has this id.")
    return web.Response(status=204)
