"""The dashboard's sign-in: the API key a person typed, kept sealed in a session cookie.

The cookie is HttpOnly (page scripts never see the key), SameSite=Strict (another site's
page cannot make the browser send it), scoped to /dashboard, Secure over HTTPS, and without
Max-Age, so it ends with the browser session. Its value is the key sealed with AES-GCM under
the master key (the same keyring that seals endpoint secrets, with associated data of its
own), so any API process can open it and nobody can read or forge one; it also expires on
its own after ``SESSION_SECONDS``.

Forms that change something also carry a token drawn at sign-in and kept in the sealed
session, and their Origin must be this site: two defences against cross-site requests,
so that either one alone still holds.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets
from dataclasses import dataclass
from urllib.parse import urlsplit

import orjson
from aiohttp import web

from webhook_service.api.context import services
from webhook_service.crypto import MasterKeyError
from webhook_service.timeutil import now_ms

COOKIE = "whs_dashboard"
COOKIE_PATH = "/dashboard"
CSRF_FIELD = "csrf"
SESSION_SECONDS = 8 * 3600
# Associated data: a sealed endpoint secret never opens as a session, nor the reverse.
_PURPOSE = "dashboard-session"


@dataclass(frozen=True)
class Session:
    key: str
    csrf: str
    expires_ms: int


def new_session(key: str) -> Session:
    return Session(key, secrets.token_urlsafe(24), now_ms() + SESSION_SECONDS * 1000)


def seal(request: web.Request, session: Session) -> str:
    plain = orjson.dumps({"k": session.key, "c": session.csrf, "e": session.expires_ms})
    token = services(request).box.seal(plain.decode(), _PURPOSE)
    # The token holds '/', '+', '=' and ':', which cookie values may not carry unquoted.
    return base64.urlsafe_b64encode(token.encode()).decode()


def current(request: web.Request) -> Session | None:
    """The session the request's cookie holds, or None: absent, forged, or expired."""
    cookie = request.cookies.get(COOKIE)
    if not cookie:
        return None
    try:
        token = base64.urlsafe_b64decode(cookie.encode()).decode()
        fields = orjson.loads(services(request).box.open(token, _PURPOSE))
        session = Session(str(fields["k"]), str(fields["c"]), int(fields["e"]))
    except (
        binascii.Error,
        UnicodeDecodeError,
        MasterKeyError,
        orjson.JSONDecodeError,
        KeyError,
        TypeError,
        ValueError,
    ):
        return None
    return session if session.expires_ms > now_ms() else None


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
