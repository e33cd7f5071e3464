"""Bearer keys. The admin key comes from settings; every route but /healthz needs a key."""

from __future__ import annotations

import hashlib
import hmac

from aiohttp import web

from webhook_service.api.context import services
from webhook_service.api.problems import Handler, ProblemError

PUBLIC_PATHS = frozenset({"/healthz"})
CALLER_KEY_ID = web.RequestKey("caller_key_id", str)


def key_id(key: str) -> str:
    """A stable, non-secret name for a key: idempotency windows are scoped by it."""
    return "k" + hashlib.sha256(key.encode()).hexdigest()[:16]


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.path in PUBLIC_PATHS:
        return await handler(request)
    header = request.headers.get("Authorization", "")
    scheme, _, presented = header.partition(" ")
    admin = services(request).settings.admin_key
    if scheme.lower() != "bearer" or not presented or admin is None:
        raise ProblemError(
            401, "Send an API key as 'Authorization: Bearer <key>'.",
            headers={"WWW-Authenticate": "Bearer"},
        )  # fmt: skip
    if not hmac.compare_digest(presented.strip().encode(), admin.get_secret_value().encode()):
        raise ProblemError(401, "The API key is not valid.", headers={"WWW-Authenticate": "Bearer"})
    request[CALLER_KEY_ID] = key_id(presented.strip())
    return await handler(request)
