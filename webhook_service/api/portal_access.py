"""Portal links: an operator makes one for an application's subscriber, or revokes them all
(webhook_service/portal_access.py has the model, store/portal.py the records).

``POST /v1/applications/{app}/portal-access`` answers the link once; ``DELETE`` on the same
path ends every link and every portal session of the application at once. The flat form
acts on the default application, or a bound key's own, as every tenant route does.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from webhook_service.api.body import read_model
from webhook_service.api.context import services
from webhook_service.api.routing import tenant_route
from webhook_service.api.tenancy import home_application
from webhook_service.portal_access import (
    DEFAULT_EXPIRES_IN,
    MAX_EXPIRES_IN,
    MIN_EXPIRES_IN,
    Capability,
    granted,
)
from webhook_service.timeutil import iso, now_ms

routes = web.RouteTableDef()

ENTER_PATH = "/portal/enter"


class PortalAccessIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    expires_in: int = Field(DEFAULT_EXPIRES_IN, ge=MIN_EXPIRES_IN, le=MAX_EXPIRES_IN)
    # None: DEFAULT_CAPABILITIES. View is always held (portal_access.granted).
    capabilities: (
        Annotated[
            list[Annotated[Capability, Field(strict=False)]],
            Field(max_length=len(Capability)),
        ]
        | None
    ) = None
    read_only: bool = False


def _base_url(request: web.Request) -> str:
    configured = services(request).settings.public_url
    if configured is not None:
        return configured
    # The operator's own request names where it reached us; behind a TLS-terminating
    # proxy its header says the scheme the operator used.
    https = request.secure or request.headers.get("X-Forwarded-Proto") == "https"
    return f"{'https' if https else request.scheme}://{request.host}"


@tenant_route(routes, "POST", "/v1/portal-access")
async def create_portal_access(request: web.Request) -> web.Response:
    svc = services(request)
    app_id = await home_application(request)
    if request.body_exists:
        body = await read_model(request, PortalAccessIn, svc.settings.max_payload_bytes)
    else:
        body = PortalAccessIn()
    expires_ms = now_ms() + body.expires_in * 1000
    capabilities = granted(body.capabilities, body.read_only)
    token = await svc.portal.grant(app_id, capabilities, expires_ms)
    url = f"{_base_url(request)}{ENTER_PATH}?{urlencode({'token': token})}"
    return web.json_response(
        {
            "url": url,
            "token": token,
            "expires_at": iso(expires_ms),
            "capabilities": sorted(capabilities),
        },
        status=201,
        # The token is a credential: no cache along the way may keep the answer.
        headers={"Cache-Control": "no-store"},
    )


@tenant_route(routes, "DELETE", "/v1/portal-access")
async def revoke_portal_access(request: web.Request) -> web.Response:
    svc = services(request)
    await svc.portal.revoke(await home_application(request))
    return web.Response(status=204)
