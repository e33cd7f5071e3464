"""What a portal session may call: each API route open to it, and the capability it needs.

A portal caller (api/auth.py: a ``whps_`` credential) is bound to its one application, as
a bound key is (api/tenancy.py answers 404 for every other), and its scopes are ignored:
this table alone decides. A route missing here answers it 404, as if it did not exist:
routes added later are closed to the portal until someone opens them here on purpose.
Keys are (method, canonical route path) as aiohttp registers them; HEAD is GET's.

Only the routes nested under ``/v1/applications/{app}`` (the portal's pages call no flat
one), the global event-type catalog, and a job's progress (which has no nested form; the
bound check there shows the application's own jobs only).
"""

from __future__ import annotations

from typing import Final

from webhook_service.api.routing import NESTED_PREFIX
from webhook_service.portal_access import Capability

_APP: Final = NESTED_PREFIX
_ENDPOINT: Final = _APP + "/endpoints/{endpoint_id}"

PORTAL_ROUTES: dict[tuple[str, str], Capability] = {
    ("GET", _APP): Capability.VIEW,
    ("GET", _APP + "/endpoints"): Capability.VIEW,
    ("GET", _ENDPOINT): Capability.VIEW,
    ("GET", _ENDPOINT + "/stats"): Capability.VIEW,
    ("GET", _APP + "/deliveries"): Capability.VIEW,
    ("GET", _APP + "/deliveries/{delivery_id}"): Capability.VIEW,
    ("GET", _APP + "/events"): Capability.VIEW,
    ("GET", _APP + "/events/{event_id}"): Capability.VIEW,
    ("GET", "/v1/jobs/{job_id}"): Capability.VIEW,
    ("GET", "/v1/event-types"): Capability.VIEW,
    ("GET", "/v1/event-types/{name}"): Capability.VIEW,
    ("POST", _APP + "/endpoints"): Capability.MANAGE_ENDPOINTS,
    ("PATCH", _ENDPOINT): Capability.MANAGE_ENDPOINTS,
    ("DELETE", _ENDPOINT): Capability.MANAGE_ENDPOINTS,
    ("POST", _ENDPOINT + "/enable"): Capability.MANAGE_ENDPOINTS,
    ("POST", _ENDPOINT + "/disable"): Capability.MANAGE_ENDPOINTS,
    ("GET", _ENDPOINT + "/secret"): Capability.VIEW_SECRETS,
    ("POST", _ENDPOINT + "/rotate-secret"): Capability.ROTATE_SECRETS,
    ("POST", _APP + "/deliveries/{delivery_id}/retry"): Capability.RETRY,
    ("POST", _APP + "/deliveries/retry"): Capability.RETRY,
    ("POST", _ENDPOINT + "/recover"): Capability.RETRY,
    ("POST", _ENDPOINT + "/send-example"): Capability.SEND_EXAMPLES,
}


def required_capability(method: str, route_path: str) -> Capability | None:
    """What a portal caller needs for this route; None: the route is closed to it."""
    return PORTAL_ROUTES.get(("GET" if method == "HEAD" else method, route_path))
