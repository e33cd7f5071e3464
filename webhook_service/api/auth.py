"""Who is calling, and whether the route lets them: a bearer key, resolved on every request.

Two kinds of key: the bootstrap admin key from settings (WEBHOOK_ADMIN_KEY, scope admin)
and API keys made with POST /v1/api-keys. An API key is looked up in Redis on each request
(nothing cached), so deleting one shuts it out from the next request on.

And one more caller, the subscriber portal: its pages call the API with a portal
credential (``whps_…``, webhook_service/portal_access.py), checked as carefully on each
request (sealed by us, not expired, not signed out, not revoked: store/portal.py). It is
bound to its application and holds capabilities instead of scopes; api/portal_routes.py
says which routes it may call with which. A portal link's token (``whp_…``) is no
credential here at all: it only opens a session at /portal/enter.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from aiohttp import web

from webhook_service.api.context import services
from webhook_service.api.portal_routes import required_capability
from webhook_service.api.problems import Handler, ProblemError
from webhook_service.api.scopes import Scope, grants, required_scope
from webhook_service.portal_access import CREDENTIAL_PREFIX, Capability, open_credential


@dataclass(frozen=True)
class Caller:
    key_id: str
    scopes: frozenset[str]
    rate_limit: float | None = None  # events per second on ingest
    # The one application the key sees (api/tenancy.py); None: every one.
    application: str | None = None
    # A portal session's (api/portal_routes.py decides, not scopes); None: a key's caller.
    capabilities: frozenset[Capability] | None = None


CALLER = web.RequestKey("caller", Caller)
# Idempotency windows and stored events name the caller's key by this id.
CALLER_KEY_ID = web.RequestKey("caller_key_id", str)

_CHALLENGE = {"WWW-Authenticate": "Bearer"}


# The bootstrap key's public id: what events it sent show as key_id, and what its
# idempotency windows are scoped by. A fixed name, not anything computed from the key:
# an unsalted hash of it (the id used to be a SHA-256 prefix) let any events:read key test
# guesses offline. It keeps windows per key all the same: there is one bootstrap key, and
# no API key id can be "admin" (theirs are "key_..."). And unlike an HMAC under the master
# key, it stays the same through a master-key rotation, when processes hold different
# current keys; an id that changed mid-window would let a producer's retry store the event
# twice. Changing WEBHOOK_ADMIN_KEY keeps the id too, and the windows: the same operator
# retrying with the same Idempotency-Key gets the event already stored.
ADMIN_KEY_ID = "admin"


async def authenticate(request: web.Request) -> Caller:
    """The caller behind the request's bearer key, or a 401 that never echoes the key."""
    scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
    presented = presented.strip()
    if scheme.lower() != "bearer" or not presented:
        raise ProblemError(
            401, "Send an API key as 'Authorization: Bearer <key>'.", headers=_CHALLENGE
        )
    svc = services(request)
    if presented.startswith(CREDENTIAL_PREFIX):
        return await _portal_caller(request, presented)
    admin = svc.settings.admin_key
    # Keys are ASCII; anything else would not even encode back to the bytes that were sent.
    if presented.isascii():
        if admin is not None and hmac.compare_digest(
            presented.encode(), admin.get_secret_value().encode()
        ):
            return Caller(ADMIN_KEY_ID, frozenset({Scope.ADMIN}))
        record = await svc.api_keys.verify(presented)
        if record is not None:
            return Caller(
                record.id, frozenset(record.scopes), record.rate_limit, record.application
            )
    raise ProblemError(401, "The API key is not valid.", headers=_CHALLENGE)


async def _portal_caller(request: web.Request, presented: str) -> Caller:
    svc = services(request)
    claims = open_credential(svc.box, presented)
    if claims is None or not await svc.portal.session_alive(claims):
        raise ProblemError(
            401,
            "The portal session has ended (expired, signed out or revoked).",
            headers=_CHALLENGE,
        )
    return Caller(
        f"portal:{claims.sid}",
        frozenset(),
        application=claims.app_id,
        capabilities=claims.capabilities,
    )


def _check_portal(caller: Caller, method: str, route_path: str | None) -> None:
    """A portal caller reaches the routes api/portal_routes.py opens to it, with the
    capability each needs; every other route is missing for it (404), as it would be for
    a caller that knows nothing of it."""
    if route_path is None:
        return  # no route matched: the 404 or 405 it would get anyway
    needed = required_capability(method, route_path)
    if needed is None:
        raise ProblemError(404, "Nothing is here for a portal session.")
    if caller.capabilities is None or needed not in caller.capabilities:
        raise ProblemError(
            403,
            f"This portal access does not include the '{needed}' capability this needs.",
            kind="missing-capability",
        )


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
    if caller.capabilities is not None:
        _check_portal(caller, request.method, route_path)
    # needed is None here only when no route matched: any valid key may learn so (404, 405).
    elif needed is not None and not grants(caller.scopes, needed):
        raise ProblemError(
            403,
            f"This API key does not have the '{needed}' scope this route needs.",
            kind="insufficient-scope",
            headers={"WWW-Authenticate": f'Bearer error="insufficient_scope", scope="{needed}"'},
        )
    request[CALLER] = caller
    request[CALLER_KEY_ID] = caller.key_id
    return await handler(request)
