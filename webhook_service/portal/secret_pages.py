"""An endpoint's signing secret in the portal: shown once when made (a new endpoint, a
rotation), and revealed again only to a session that may (``view_secrets``).

Shown on the answer to a POST only, never put in a URL nor in a page a GET returns: the
secret is as good as the right to forge our webhooks to that endpoint.
"""

from __future__ import annotations

from aiohttp import web

from webhook_service.admin import describe as d
from webhook_service.admin.api import JSON, AdminApi
from webhook_service.api.body import read_form
from webhook_service.dashboard.endpoint_pages import GRACE_CHOICES, choice
from webhook_service.dashboard.markup import Markup, render
from webhook_service.portal import layout
from webhook_service.portal.layout import Brand
from webhook_service.portal.place import path
from webhook_service.portal.session import PortalSession
from webhook_service.portal.views import portal_page


def shown_once(record: JSON) -> Markup:
    """An HMAC endpoint's secret, or an ed25519 one's public key (its private key never
    leaves us), with what to do with it."""
    if record.get("secret"):
        return render(
            "<p>Your signing secret. Keep it on your server only: with it you check that "
            'a request came from us.</p><pre class="secret">$s</pre>',
            s=record["secret"],
        )
    return render(
        "<p>Our public key for this endpoint: check each request's signature with it.</p>"
        '<pre class="secret">$k</pre>',
        k=record.get("public_key") or d.NOTHING,
    )


def _trail(endpoint_id: str) -> list[tuple[str, str]]:
    return [("Endpoints", path()), (endpoint_id, path("endpoints", endpoint_id))]


@portal_page
async def reveal(
    request: web.Request, session: PortalSession, api: AdminApi, brand: Brand
) -> web.StreamResponse:
    endpoint_id = request.match_info["endpoint_id"]
    current = await api.secret(endpoint_id)
    body = render(
        '$secret<p><a href="$back">Back to the endpoint</a></p>',
        secret=shown_once(current),
        back=path("endpoints", endpoint_id),
    )
    return layout.page(
        "Signing secret", body, session, brand, active="endpoints", trail=_trail(endpoint_id)
    )


@portal_page
async def rotate(
    request: web.Request, session: PortalSession, api: AdminApi, brand: Brand
) -> web.StreamResponse:
    endpoint_id = request.match_info["endpoint_id"]
    form = await read_form(request)
    rotated = await api.rotate_secret(
        endpoint_id, choice(form.get("grace_period_seconds"), GRACE_CHOICES)
    )
    until = [d.moment(p["expires_at"]) for p in rotated["previous_keys"]]
    body = render(
        "$secret<p>Requests are signed with the new key from now on, and also with the old "
        "one until: $until. Put the new one on your server before then.</p>"
        '<p><a href="$back">Back to the endpoint</a></p>',
        secret=shown_once(rotated),
        until=", ".join(until) or "now (no grace)",
        back=path("endpoints", endpoint_id),
    )
    return layout.page(
        "Secret rotated", body, session, brand, active="endpoints", trail=_trail(endpoint_id)
    )
