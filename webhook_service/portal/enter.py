"""Into the portal and out: a portal link's token exchanged for a session, and sign-out.

``GET /portal/enter?token=whp_…`` checks the link (store/portal.py: known, not expired, not
revoked), opens a session (session.py) and answers 303 to ``/portal``, so that the token
leaves the address bar, the history's current entry and every later Referer at once (and
Referrer-Policy no-referrer holds on every portal answer besides). The link is not used up:
it opens a session again until it expires, so an operator may keep one link in the page
that frames the portal.

``POST /portal/logout`` (the session's form token, our own origin) deletes the session's
record before it drops the cookie: every copy of the cookie is refused from then on. It
lands on ``/portal/signed-out``, which needs no session.
"""

from __future__ import annotations

from aiohttp import web

from webhook_service.api.body import read_form
from webhook_service.api.context import services
from webhook_service.api.models import application_json
from webhook_service.dashboard.access import redirect
from webhook_service.portal.layout import signed_out_page
from webhook_service.portal.session import current, end, forget, keep, start, valid_form_token

PREFIX = "/portal"
HOME = PREFIX
ENTER = PREFIX + "/enter"
LOGOUT = PREFIX + "/logout"
SIGNED_OUT = PREFIX + "/signed-out"

_REFUSED = (
    "This portal link has expired, was withdrawn, or is not a portal link. Ask the service "
    "that sent it to you for a new one."
)
# The entry's answers set a credential (no cache may keep them) and follow a URL that held
# the token (no Referer may carry it on).
_PORTAL_HEADERS = {"Referrer-Policy": "no-referrer", "Cache-Control": "no-store"}


def _to(location: str) -> web.Response:
    response = redirect(location)
    response.headers.update(_PORTAL_HEADERS)
    return response


async def enter(request: web.Request) -> web.StreamResponse:
    svc = services(request)
    grant = await svc.portal.redeem(request.query.get("token", ""))
    application = None if grant is None else await svc.applications.get(grant.app_id)
    if grant is None or application is None:
        return signed_out_page(401, "This link does not open the portal", _REFUSED)
    previous = await current(request)
    if previous is not None:
        # One portal session per browser: the one it had ends here, not at its expiry.
        await end(request, previous)
    session = await start(request, grant)
    response = _to(HOME)
    keep(response, request, session, application_json(application))
    return response


async def logout(request: web.Request) -> web.StreamResponse:
    session = await current(request)
    if session is not None:
        if not valid_form_token(request, session, await read_form(request)):
            return signed_out_page(403, "Refused", "This form did not come from this portal.")
        await end(request, session)
    response = _to(SIGNED_OUT)
    forget(response)
    return response


async def signed_out(_: web.Request) -> web.StreamResponse:
    # A page of its own, outside any session: whoever lands here holds none.
    return signed_out_page(
        200,
        "Signed out",
        "You have signed out of the portal. To come back, open your portal link again.",
    )


def add_routes(app: web.Application) -> None:
    """The portal's entry and sign-out. Each is public to the API's key check
    (api/scopes.py): it checks a portal link or session of its own."""
    app.router.add_get(ENTER, enter)
    app.router.add_post(LOGOUT, logout)
    app.router.add_get(SIGNED_OUT, signed_out)
