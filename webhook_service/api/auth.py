"""Who is calling, and whether the route lets them: a bearer key, resolved on every request.

Two kinds of key: the bootstrap admin key from settings (WEBHOOK_ADMIN_KEY, scope admin)
and API keys made with POST /v1/api-keys. An API key is looked up in Redis on each request
(nothing cached), so deleting one shuts it out from the next request on.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from aiohttp import web

from webhook_service.api.context import services
from webhook_service.api.problems import Handler, ProblemError
from webhook_service.api.scopes import Scope, grants, required_scope


@dataclass(frozen=True)
class Caller:
    key_id: str
    scopes: frozenset[str]
    rate_limit: float | None = None  # events per second on ingest


CALLER = web.RequestKey("caller", Caller)
# Idempotency windows and stored events name the caller's key by this id.
CALLER_KEY_ID = web.RequestKey("caller_key_id", str)

_CHALLENGE = {"WWW-Authenticate": "Bearer"}


def key_id(key: str) -> str:
    """A stable, non-secret name for the bootstrap key: idempotency windows are scoped by it."""
    return "k" + hashlib.sha256(key.encode()).hexdigest()[:16]


async def authenticate(request: web.Request) -> Caller:
    """The caller behind the request's bearer key, or a 401 that never echoes the key."""
    scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
    presented = presented.strip()
    if scheme.lower() != "bearer" or not presented:
        raise ProblemError(
            401, "Send an API key as 'Authorization: Bearer <key>'.", headers=_CHALLENGE
        )
    svc = services(request)
    admin = svc.settings.admin_key
    # Keys are ASCII; anything else would not even encode back to the bytes that were sent.
    if presented.isascii():
        if admin is not None and hmac.compare_digest(
            presented.encode(), admin.get_secret_value().encode()
        ):
            return Caller(key_id(presented), frozenset({Scope.ADMIN}))
        record = await svc.api_keys.verify(presented)
        if record is not None:
            return Caller(record.id, frozenset(record.scopes), record.rate_limit)
    raise ProblemError(401, "The API key is not valid.", headers=_CHALLENGE)


def _route_path(request: web.Request) -> str | None:
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else None


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    route_path = _route_path(request)
    needed = None if route_path is None else required_scope(request.method, route_path)
    if route_path is not None and needed is None:
        return await handler(request)
    caller = await authenticate(request)
    # needed is None here only when no route matched: any valid key may learn so (404, 405).
    if needed is not None and not grants(caller.scopes, needed):
        raise ProblemError(
            403,
            f"This API key does not have the '{needed}' scope this route needs.",
            kind="insufficient-scope",
            headers={"WWW-Authenticate": f'Bearer error="insufficient_scope", scope="{needed}"'},
        )
    request[CALLER] = caller
    request[CALLER_KEY_ID] = caller.key_id
    return await handler(request)
