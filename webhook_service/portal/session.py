"""A portal session: what a subscriber's browser holds after following a portal link.

The link's token is exchanged once, at ``GET /portal/enter`` (enter.py), for a session: its
claims (application, capabilities, form token, expiry) sealed under the master key into the
portal **credential** (``whps_…``, webhook_service/portal_access.py), kept in a cookie that
is HttpOnly and scoped to /portal. The pages call the API with that credential as their
bearer key (portal/views.py), and the API checks it as this module does: sealed by us, not
expired, its Redis record there (sign-out deletes it) and of the application's current
generation (``DELETE …/portal-access`` bumps it). Redis holds no credential, only the
session's generation, so a copy of Redis opens no portal.

SameSite: Strict, unless the application may frame its portal (``portal_origins``) and the
request came over HTTPS. A portal framed in the operator's site is a third-party context,
where browsers do not send a Strict (nor Lax) cookie, so there it is ``SameSite=None;
Secure``. Cross-site requests then carry the cookie, and the two defences every form has
carry the weight: the form token drawn for the session, and the Origin check
(``from_this_site``); each alone still holds.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from multidict import MultiDictProxy

from webhook_service.api.context import services
from webhook_service.dashboard.session import same_origin
from webhook_service.portal_access import (
    Capability,
    Grant,
    SessionClaims,
    new_claims,
    open_credential,
    seal_credential,
)
from webhook_service.timeutil import now_ms

COOKIE = "whs_portal"
COOKIE_PATH = "/portal"
CSRF_FIELD = "csrf"


@dataclass(frozen=True)
class PortalSession:
    # The sealed session: the cookie's value and the pages' bearer key for the API.
    credential: str
    app_id: str
    capabilities: frozenset[Capability]
    # The form token every state-changing form carries.
    csrf: str
    expires_ms: int
    # Names the session's record in Redis.
    sid: str

    @classmethod
    def of(cls, credential: str, claims: SessionClaims) -> PortalSession:
        return cls(
            credential,
            claims.app_id,
            claims.capabilities,
            claims.csrf,
            claims.expires_ms,
            claims.sid,
        )

    @property
    def claims(self) -> SessionClaims:
        return SessionClaims(self.app_id, self.sid, self.capabilities, self.csrf, self.expires_ms)


async def start(request: web.Request, grant: Grant) -> PortalSession:
    """A new session from a live grant, recorded in Redis until the grant expires."""
    svc = services(request)
    claims = new_claims(grant)
    await svc.portal.open_session(grant, claims)
    return PortalSession.of(seal_credential(svc.box, claims), claims)


async def current(request: web.Request) -> PortalSession | None:
    """The session the request's cookie holds, or None: absent, forged, expired, signed out
    or revoked."""
    credential = request.cookies.get(COOKIE)
    if not credential:
        return None
    svc = services(request)
    claims = open_credential(svc.box, credential)
    if claims is None or not await svc.portal.session_alive(claims):
        return None
    return PortalSession.of(credential, claims)


async def end(request: web.Request, session: PortalSession) -> None:
    """Sign-out, server-side: the credential, and every copy of it, is refused from now."""
    await services(request).portal.end_session(session.claims)


def over_https(request: web.Request) -> bool:
    # Trusting the proxy's header is safe here: it can only make the cookie Secure (or, with
    # portal_origins, let it be sent framed, which the form token and Origin check guard).
    return request.secure or request.headers.get("X-Forwarded-Proto") == "https"


def keep(
    response: web.StreamResponse,
    request: web.Request,
    session: PortalSession,
    application: Mapping[str, Any],
) -> None:
    """Set the session's cookie; ``application`` as the API shows it (its portal_origins
    decide whether the cookie must work framed)."""
    secure = over_https(request)
    framed = secure and bool(application.get("portal_origins"))
    response.set_cookie(
        COOKIE,
        session.credential,
        path=COOKIE_PATH,
        # Until the grant expires: the session would be refused after that anyway.
        max_age=max(0, (session.expires_ms - now_ms()) // 1000),
        httponly=True,
        samesite="None" if framed else "Strict",
        secure=secure,
    )


def forget(response: web.StreamResponse) -> None:
    response.del_cookie(COOKIE, path=COOKIE_PATH)


def from_this_site(request: web.Request) -> bool:
    """The Origin check of the dashboard's forms, but for "Origin: null", which browsers
    send with a form of a page under Referrer-Policy no-referrer (every portal page): then
    Sec-Fetch-Site, which no page can set, must say the request came from our own origin.
    An attacker's sandboxed frame sends null too, but as cross-site."""
    if request.headers.get("Origin") == "null":
        return request.headers.get("Sec-Fetch-Site") == "same-origin"
    return same_origin(request)


def valid_form_token(
    request: web.Request, session: PortalSession, form: MultiDictProxy[str]
) -> bool:
    """A state-changing form came from one of this session's pages: our own origin and the
    session's form token."""
    presented = form.get(CSRF_FIELD)
    return (
        from_this_site(request)
        and isinstance(presented, str)
        and hmac.compare_digest(presented.encode(), session.csrf.encode())
    )


def frame_ancestors(application: Mapping[str, Any]) -> str:
    """The CSP ``frame-ancestors`` of the application's portal pages (the API's view of the
    application): its portal_origins, or 'none' (framed nowhere) without any."""
    origins = application.get("portal_origins") or []
    return " ".join(str(origin) for origin in origins) or "'none'"
