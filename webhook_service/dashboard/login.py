"""Signing in with an API key, and out."""

from __future__ import annotations

from aiohttp import web

from webhook_service.admin.api import AdminApi
from webhook_service.api.body import read_form
from webhook_service.client.errors import APIError, TransportError
from webhook_service.dashboard import layout
from webhook_service.dashboard.access import api_for, redirect, signed_in, unavailable
from webhook_service.dashboard.markup import path, render
from webhook_service.dashboard.places import Place
from webhook_service.dashboard.session import (
    Session,
    current,
    end,
    forget,
    keep,
    new_session,
    same_origin,
    start,
)

_FORM = """<form method="post" action="$action" class="login">
<p>Sign in with an API key. It is kept, sealed, in a cookie of this browser session only;
what you can see and do here is what the key's scopes allow.</p>
<label>API key <input type="password" name="key" autocomplete="off" required autofocus></label>
<button type="submit">Sign in</button>
</form>"""


def _login_page(note: str = "", status: int = 200, error: bool = False) -> web.Response:
    body = render(_FORM, action=path("login"))
    return layout.page("Sign in", body, None, note=note, status=status, error=error)


async def login_form(request: web.Request) -> web.StreamResponse:
    if await current(request) is not None:
        return redirect("/dashboard")
    return _login_page(layout.notice(request))


async def _check(api: AdminApi) -> str | None:
    """Why the key cannot sign in, or None. A valid key lacking endpoints:read may: each
    page then says which scope it misses."""
    try:
        await api.endpoints(limit=1)
    except APIError as exc:
        if exc.status == 401:
            return "That key is not valid."
        if exc.status == 503:
            raise unavailable(exc) from exc
        if exc.status != 403:
            return f"The API answered {exc.status}: {exc.problem.detail}"
    except TransportError as exc:
        return str(exc)
    return None


async def login(request: web.Request) -> web.StreamResponse:
    # Login CSRF (signing a victim into the attacker's key) is refused by origin: there is
    # no session yet whose token a form could carry.
    if not same_origin(request):
        return layout.error_page(
            403, "Refused", "This form did not come from this dashboard.", None
        )
    form = await read_form(request)
    key = form.get("key")
    key = key.strip() if isinstance(key, str) else ""
    if not key:
        return _login_page("Enter an API key.", 422, error=True)
    problem = await _check(api_for(request, key))
    if problem is not None:
        return _login_page(problem, 422, error=True)
    session = new_session(key)
    await start(request, session)
    response = redirect("/dashboard")
    keep(response, request, session)
    return response


@signed_in
async def logout(
    request: web.Request, session: Session, api: AdminApi, place: Place
) -> web.StreamResponse:
    # Server-side first: the browser may keep its cookie (or someone may hold a copy), but
    # no process takes it once the record is gone.
    await end(request, session)
    response = redirect(path("login") + "?done=signed-out")
    forget(response)
    return response
