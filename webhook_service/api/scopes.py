"""Which scope each route needs. A route missing here needs ``admin``: new routes fail closed.

Keys are (method, canonical route path) as aiohttp registers them; HEAD is answered by the
GET handler and needs what GET needs. Every route should have its own entry: a test
enumerates the app's router and fails on any route left to the default.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from webhook_service.api.routing import flat_path


class Scope(StrEnum):
    EVENTS_WRITE = "events:write"
    EVENTS_READ = "events:read"
    ENDPOINTS_READ = "endpoints:read"
    ENDPOINTS_WRITE = "endpoints:write"
    DELIVERIES_READ = "deliveries:read"
    DELIVERIES_WRITE = "deliveries:write"
    APPLICATIONS_READ = "applications:read"
    APPLICATIONS_WRITE = "applications:write"
    # The event-type catalog is global: never for a key bound to one application.
    EVENT_TYPES_WRITE = "event-types:write"
    # Implies every other scope, and alone manages API keys.
    ADMIN = "admin"


# No key needed at all.
PUBLIC: Final = None

ROUTE_SCOPES: dict[tuple[str, str], Scope | None] = {
    ("GET", "/healthz"): PUBLIC,
    ("GET", "/readyz"): PUBLIC,
    ("GET", "/metrics"): Scope.ADMIN,
    # No API key: the route checks its own bearer secret, WEBHOOK_CRON_SECRET.
    ("POST", "/v1/cron/tick"): PUBLIC,
    ("POST", "/v1/events"): Scope.EVENTS_WRITE,
    ("GET", "/v1/events/{event_id}"): Scope.EVENTS_READ,
    ("GET", "/v1/endpoints"): Scope.ENDPOINTS_READ,
    ("POST", "/v1/endpoints"): Scope.ENDPOINTS_WRITE,
    ("GET", "/v1/endpoints/{endpoint_id}"): Scope.ENDPOINTS_READ,
    ("PATCH", "/v1/endpoints/{endpoint_id}"): Scope.ENDPOINTS_WRITE,
    ("DELETE", "/v1/endpoints/{endpoint_id}"): Scope.ENDPOINTS_WRITE,
    # Reading a signing secret lets one forge webhooks: it is for whoever manages endpoints.
    ("GET", "/v1/endpoints/{endpoint_id}/secret"): Scope.ENDPOINTS_WRITE,
    ("POST", "/v1/endpoints/{endpoint_id}/rotate-secret"): Scope.ENDPOINTS_WRITE,
    ("GET", "/v1/deliveries"): Scope.DELIVERIES_READ,
    ("GET", "/v1/deliveries/{delivery_id}"): Scope.DELIVERIES_READ,
    ("POST", "/v1/deliveries/{delivery_id}/retry"): Scope.DELIVERIES_WRITE,
    ("POST", "/v1/deliveries/retry"): Scope.DELIVERIES_WRITE,
    ("POST", "/v1/endpoints/{endpoint_id}/enable"): Scope.ENDPOINTS_WRITE,
    ("POST", "/v1/endpoints/{endpoint_id}/disable"): Scope.ENDPOINTS_WRITE,
    ("POST", "/v1/endpoints/{endpoint_id}/recover"): Scope.DELIVERIES_WRITE,
    # An event of its own, to that one endpoint (api/events.py send_example).
    ("POST", "/v1/endpoints/{endpoint_id}/send-example"): Scope.EVENTS_WRITE,
    # Evaluates the endpoint's filter on a given event: reads it, changes nothing.
    ("POST", "/v1/endpoints/{endpoint_id}/test-filter"): Scope.ENDPOINTS_READ,
    ("GET", "/v1/jobs/{job_id}"): Scope.DELIVERIES_READ,
    ("GET", "/v1/applications"): Scope.APPLICATIONS_READ,
    ("POST", "/v1/applications"): Scope.APPLICATIONS_WRITE,
    ("GET", "/v1/applications/{app}"): Scope.APPLICATIONS_READ,
    ("PATCH", "/v1/applications/{app}"): Scope.APPLICATIONS_WRITE,
    ("DELETE", "/v1/applications/{app}"): Scope.APPLICATIONS_WRITE,
    # Portal links (api/portal_access.py): making one hands out the application's portal.
    ("POST", "/v1/portal-access"): Scope.APPLICATIONS_WRITE,
    ("DELETE", "/v1/portal-access"): Scope.APPLICATIONS_WRITE,
    ("GET", "/v1/api-keys"): Scope.ADMIN,
    ("POST", "/v1/api-keys"): Scope.ADMIN,
    ("DELETE", "/v1/api-keys/{key_id}"): Scope.ADMIN,
    ("GET", "/v1/events"): Scope.EVENTS_READ,
    ("POST", "/v1/events/{event_id}/replay"): Scope.EVENTS_WRITE,
    ("DELETE", "/v1/events/{event_id}/payload"): Scope.EVENTS_WRITE,
    ("DELETE", "/v1/events/{event_id}/schedule"): Scope.EVENTS_WRITE,
    ("GET", "/v1/endpoints/{endpoint_id}/stats"): Scope.DELIVERIES_READ,
    # The event-type catalog (api/event_types.py): read by whoever reads events.
    ("GET", "/v1/event-types"): Scope.EVENTS_READ,
    ("POST", "/v1/event-types"): Scope.EVENT_TYPES_WRITE,
    ("POST", "/v1/event-types/import"): Scope.EVENT_TYPES_WRITE,
    ("GET", "/v1/event-types/{name}"): Scope.EVENTS_READ,
    ("PATCH", "/v1/event-types/{name}"): Scope.EVENT_TYPES_WRITE,
    ("DELETE", "/v1/event-types/{name}"): Scope.EVENT_TYPES_WRITE,
    # The dashboard (webhook_service/dashboard/) is public to this check only: each page
    # needs its own session cookie (redirecting to the sign-in page without one), and does
    # nothing itself; it calls this API with the signed-in person's key, so every scope
    # above still applies to what it shows and does. Its forms also carry a CSRF token.
    ("GET", "/dashboard"): PUBLIC,
    ("GET", "/dashboard/login"): PUBLIC,
    ("POST", "/dashboard/login"): PUBLIC,
    ("POST", "/dashboard/logout"): PUBLIC,
    ("GET", "/dashboard/endpoints/new"): PUBLIC,
    ("POST", "/dashboard/endpoints"): PUBLIC,
    ("GET", "/dashboard/endpoints/{endpoint_id}"): PUBLIC,
    ("GET", "/dashboard/endpoints/{endpoint_id}/edit"): PUBLIC,
    ("POST", "/dashboard/endpoints/{endpoint_id}/edit"): PUBLIC,
    ("POST", "/dashboard/endpoints/{endpoint_id}/send-example"): PUBLIC,
    ("POST", "/dashboard/endpoints/{endpoint_id}/enable"): PUBLIC,
    ("POST", "/dashboard/endpoints/{endpoint_id}/disable"): PUBLIC,
    ("POST", "/dashboard/endpoints/{endpoint_id}/rotate-secret"): PUBLIC,
    ("POST", "/dashboard/endpoints/{endpoint_id}/recover"): PUBLIC,
    ("GET", "/dashboard/events"): PUBLIC,
    ("GET", "/dashboard/events/{event_id}"): PUBLIC,
    ("GET", "/dashboard/deliveries"): PUBLIC,
    ("POST", "/dashboard/deliveries/retry"): PUBLIC,
    ("GET", "/dashboard/deliveries/{delivery_id}"): PUBLIC,
    ("POST", "/dashboard/deliveries/{delivery_id}/retry"): PUBLIC,
    ("GET", "/dashboard/jobs/{job_id}"): PUBLIC,
    # Portal links (dashboard/application_pages.py), and the catalog, one page for every
    # application (dashboard/event_type_pages.py).
    ("GET", "/dashboard/portal-links"): PUBLIC,
    ("POST", "/dashboard/portal-links"): PUBLIC,
    ("POST", "/dashboard/portal-links/revoke"): PUBLIC,
    ("GET", "/dashboard/event-types"): PUBLIC,
    # Its applications, and each page above within one (dashboard/places.py): the same
    # handler, calling /v1/applications/{app}/... with the person's key, which finds another
    # application missing (404) when bound to one.
    ("GET", "/dashboard/applications"): PUBLIC,
    ("GET", "/dashboard/applications/{app}"): PUBLIC,
    ("GET", "/dashboard/applications/{app}/endpoints/new"): PUBLIC,
    ("POST", "/dashboard/applications/{app}/endpoints"): PUBLIC,
    ("GET", "/dashboard/applications/{app}/endpoints/{endpoint_id}"): PUBLIC,
    ("GET", "/dashboard/applications/{app}/endpoints/{endpoint_id}/edit"): PUBLIC,
    ("POST", "/dashboard/applications/{app}/endpoints/{endpoint_id}/edit"): PUBLIC,
    ("POST", "/dashboard/applications/{app}/endpoints/{endpoint_id}/send-example"): PUBLIC,
    ("POST", "/dashboard/applications/{app}/endpoints/{endpoint_id}/enable"): PUBLIC,
    ("POST", "/dashboard/applications/{app}/endpoints/{endpoint_id}/disable"): PUBLIC,
    ("POST", "/dashboard/applications/{app}/endpoints/{endpoint_id}/rotate-secret"): PUBLIC,
    ("POST", "/dashboard/applications/{app}/endpoints/{endpoint_id}/recover"): PUBLIC,
    ("GET", "/dashboard/applications/{app}/events"): PUBLIC,
    ("GET", "/dashboard/applications/{app}/events/{event_id}"): PUBLIC,
    ("GET", "/dashboard/applications/{app}/deliveries"): PUBLIC,
    ("POST", "/dashboard/applications/{app}/deliveries/retry"): PUBLIC,
    ("GET", "/dashboard/applications/{app}/deliveries/{delivery_id}"): PUBLIC,
    ("POST", "/dashboard/applications/{app}/deliveries/{delivery_id}/retry"): PUBLIC,
    ("GET", "/dashboard/applications/{app}/jobs/{job_id}"): PUBLIC,
    ("GET", "/dashboard/applications/{app}/portal-links"): PUBLIC,
    ("POST", "/dashboard/applications/{app}/portal-links"): PUBLIC,
    ("POST", "/dashboard/applications/{app}/portal-links/revoke"): PUBLIC,
    ("GET", "/dashboard/static/dashboard.css"): PUBLIC,
    ("GET", "/dashboard/static/dashboard.js"): PUBLIC,
    # The subscriber portal's entry and sign-out (portal/enter.py): public to this check
    # only, as the dashboard's pages are; each checks a portal link or session of its own.
    ("GET", "/portal/enter"): PUBLIC,
    ("POST", "/portal/logout"): PUBLIC,
    ("GET", "/portal/signed-out"): PUBLIC,
    # Its pages (webhook_service/portal/): each needs its own portal session, and calls
    # this API with that session's credential, which the API limits to the session's one
    # application and capabilities (api/portal_routes.py).
    ("GET", "/portal"): PUBLIC,
    ("GET", "/portal/endpoints/new"): PUBLIC,
    ("POST", "/portal/endpoints"): PUBLIC,
    ("GET", "/portal/endpoints/{endpoint_id}"): PUBLIC,
    ("GET", "/portal/endpoints/{endpoint_id}/edit"): PUBLIC,
    ("POST", "/portal/endpoints/{endpoint_id}/edit"): PUBLIC,
    ("POST", "/portal/endpoints/{endpoint_id}/enable"): PUBLIC,
    ("POST", "/portal/endpoints/{endpoint_id}/disable"): PUBLIC,
    ("POST", "/portal/endpoints/{endpoint_id}/delete"): PUBLIC,
    ("POST", "/portal/endpoints/{endpoint_id}/recover"): PUBLIC,
    ("POST", "/portal/endpoints/{endpoint_id}/send-example"): PUBLIC,
    ("POST", "/portal/endpoints/{endpoint_id}/secret"): PUBLIC,
    ("POST", "/portal/endpoints/{endpoint_id}/rotate-secret"): PUBLIC,
    ("GET", "/portal/deliveries"): PUBLIC,
    ("GET", "/portal/deliveries/{delivery_id}"): PUBLIC,
    ("GET", "/portal/deliveries/{delivery_id}/attempts"): PUBLIC,
    ("POST", "/portal/deliveries/{delivery_id}/retry"): PUBLIC,
    ("GET", "/portal/jobs/{job_id}"): PUBLIC,
    ("GET", "/portal/event-types"): PUBLIC,
    ("GET", "/portal/verify"): PUBLIC,
    ("GET", "/portal/static/portal.css"): PUBLIC,
    ("GET", "/portal/static/portal.js"): PUBLIC,
}


def required_scope(method: str, route_path: str) -> Scope | None:
    """The scope a request to a registered route needs; None: the route is public. A route
    under /v1/applications/{app}/ needs what its flat form needs (api/tenancy.py)."""
    key = ("GET" if method == "HEAD" else method, flat_path(route_path))
    return ROUTE_SCOPES.get(key, Scope.ADMIN)


def grants(held: frozenset[str], needed: Scope) -> bool:
    return Scope.ADMIN in held or needed in held
