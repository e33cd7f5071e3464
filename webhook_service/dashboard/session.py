"""The dashboard's sign-in: the API key a person typed, kept sealed in a session cookie.

The cookie is HttpOnly (page scripts never see the key), SameSite=Strict (another site's
page cannot make the browser send it), scoped to /dashboard, Secure over HTTPS, and without
Max-Age, so it ends with the browser session. Its value is the key sealed with AES-GCM under
the master key (webhook_service/sealing.py: the same keyring that seals endpoint secrets,
with associated data of its own), so any API process can open it and nobody can read or
forge one.

A cookie alone is not a session, though: it also names a record in Redis
(``keys.dashboard_session``), which sign-out deletes and which expires after
``SESSION_SECONDS``. So a copy of the cookie (from a shared machine, a proxy's log, a
stolen backup of the browser profile) is refused by every API process the moment its owner
signs out, rather than working until its sealed expiry. The record holds nothing but its
name: Redis never sees the key, and a copy of Redis forges no cookie. Revoking the API key a
session was opened with ends it too, with no record to find: each page calls the API with
that key, and a 401 signs the person out (access.py).

Forms that change something also carry a token drawn at sign-in and kept in the sealed
session, and their Origin must be this site: two defences against cross-site requests,
so that either one alone still holds.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass
from urllib.parse import urlsplit

from aiohttp import web

from webhook_service import sealing
from webhook_service.api.context import services
from webhook_service.store import keys
from webhook_service.timeutil import now_ms

COOKIE = "whs_dashboard"
COOKIE_PATH = "/dashboard"
CSRF_FIELD = "csrf"
SESSION_SECONDS = keys.DASHBOARD_SESSION_TTL
# Associated data: a sealed endpoint secret never opens as a session, nor the reverse.
_PURPOSE = "dashboard-session"


@dataclass(frozen=True)
class Session:
    key: str
    csrf: str
    expires_ms: int
    # Names the session's record in Redis; drawn apart from the form token, which every
    # page shows.
    sid: str


def new_session(key: str) -> Session:
    expires_ms = now_ms() + SESSION_SECONDS * 1000
    return Session(key, secrets.token_urlsafe(24), expires_ms, secrets.token_urlsafe(24))


async def start(request: web.Request, session: Session) -> None:
    """Record the session, so that its cookie is one from now until sign-out or expiry."""
    redis = services(request).redis
    await redis.set(keys.dashboard_session(session.sid), "1", ex=SESSION_SECONDS)


async def end(request: web.Request, session: Session) -> None:
    """Delete the session's record: its cookie, and every copy of it, is no session now."""
    await services(request).redis.delete(keys.dashboard_session(session.sid))


def seal(request: web.Request, session: Session) -> str:
    fields = {"k": session.key, "c": session.csrf, "e": session.expires_ms, "s": session.sid}
    return sealing.seal(services(request).box, _PURPOSE, fields)


async def current(request: web.Request) -> Session | None:
    """The session the request's cookie holds, or None: absent, forged, expired, or ended."""
    session = _unsealed(request)
    if session is None or session.expires_ms <= now_ms():
        return None
    if not await services(request).redis.exists(keys.dashboard_session(session.sid)):
        return None
    return session


def _unsealed(request: web.Request) -> Session | None:
    """What the request's cookie holds, if it is one we sealed (one sealed before sessions
    had a record, without "s", is none: it signs in again)."""
    cookie = request.cookies.get(COOKIE)
    fields = sealing.unseal(services(request).box, _PURPOSE, cookie) if cookie else None
    if fields is None:
        return None
    try:
        return Session(str(fields["k"]), str(fields["c"]), int(fields["e"]), str(fields["s"]))
    except (KeyError, TypeError, ValueError):
        return None


def keep(response: web.StreamResponse, request: web.Request, session: Session) -> None:
    response.set_cookie(
        COOKIE,
        seal(request, session),
        path=COOKIE_PATH,
        httponly=True,
        samesite="Strict",
        # Trusting the proxy's header here is safe: a false one can only make the cookie
        # stricter (unsent over plain http), never looser.
        secure=request.secure or request.headers.get("X-Forwarded-Proto") == "https",
    )


def forget(response: web.StreamResponse) -> None:
    response.del_cookie(COOKIE, path=COOKIE_PATH)


def same_origin(request: web.Request) -> bool:
    """A state-changing request came from one of our own pages.

    Browsers send Origin with every form POST; when it is absent (an old browser, a
    non-browser client that holds no cookie anyway) Sec-Fetch-Site decides if present.
    Host and port are compared, not the scheme: behind a TLS-terminating proxy the page is
    https while this process sees http.
    """
    origin = request.headers.get("Origin")
    if origin is not None:
        parts = urlsplit(origin)
        return parts.scheme in ("http", "https") and parts.netloc == request.host
    return request.headers.get("Sec-Fetch-Site", "same-origin") in ("same-origin", "none")


def valid_form_token(session: Session, presented: str | None) -> bool:
    return presented is not None and hmac.compare_digest(presented.encode(), session.csrf.encode())
