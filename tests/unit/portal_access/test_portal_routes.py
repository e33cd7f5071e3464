"""The portal's route table: nested routes only (and the global reads the design names),
each capability on the routes it is for."""

from __future__ import annotations

from webhook_service.api.portal_routes import PORTAL_ROUTES, required_capability
from webhook_service.api.routing import NESTED_PREFIX
from webhook_service.portal_access import Capability

_GLOBAL = {
    ("GET", "/v1/event-types"),
    ("GET", "/v1/event-types/{name}"),
    ("GET", "/v1/jobs/{job_id}"),
}


def test_only_an_applications_routes_and_the_named_global_reads() -> None:
    outside = {route for route in PORTAL_ROUTES if not route[1].startswith(NESTED_PREFIX)} - _GLOBAL
    assert not outside
    assert all(PORTAL_ROUTES[route] is Capability.VIEW for route in _GLOBAL)


def test_reads_need_view_and_changes_something_else() -> None:
    for (method, path), needed in PORTAL_ROUTES.items():
        if path.endswith("/secret"):
            assert needed is Capability.VIEW_SECRETS
        elif method == "GET":
            assert needed is Capability.VIEW, path
        else:
            assert needed is not Capability.VIEW, (method, path)
    assert set(PORTAL_ROUTES.values()) == set(Capability)


def test_head_is_get_and_anything_else_is_closed() -> None:
    endpoints = NESTED_PREFIX + "/endpoints"
    assert required_capability("HEAD", endpoints) is Capability.VIEW
    assert required_capability("POST", endpoints) is Capability.MANAGE_ENDPOINTS
    assert required_capability("POST", NESTED_PREFIX + "/events") is None
    assert required_capability("GET", "/v1/endpoints") is None
    assert required_capability("POST", NESTED_PREFIX + "/portal-access") is None
    assert required_capability("PATCH", NESTED_PREFIX) is None
