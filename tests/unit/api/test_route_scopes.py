"""The scope table's rules, and the API-key request schema."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from webhook_service.api.models import ApiKeyIn
from webhook_service.api.scopes import ROUTE_SCOPES, Scope, grants, required_scope


def test_head_needs_what_get_needs() -> None:
    assert required_scope("HEAD", "/v1/endpoints") is Scope.ENDPOINTS_READ
    assert required_scope("HEAD", "/healthz") is None


def test_a_route_missing_from_the_table_needs_admin() -> None:
    assert ("PUT", "/v1/events") not in ROUTE_SCOPES
    assert required_scope("PUT", "/v1/events") is Scope.ADMIN
    assert required_scope("GET", "/v1/not-a-route") is Scope.ADMIN


def test_api_key_management_is_admin_only() -> None:
    managed = {k: v for k, v in ROUTE_SCOPES.items() if k[1].startswith("/v1/api-keys")}
    assert len(managed) == 3
    assert set(managed.values()) == {Scope.ADMIN}


def test_reading_a_signing_secret_is_not_a_read_scope() -> None:
    assert required_scope("GET", "/v1/endpoints/{endpoint_id}/secret") is Scope.ENDPOINTS_WRITE


@pytest.mark.parametrize("scope", list(Scope))
def test_admin_implies_every_scope_and_others_only_themselves(scope: Scope) -> None:
    assert grants(frozenset({Scope.ADMIN}), scope)
    assert grants(frozenset({scope}), scope)
    others = frozenset(s for s in Scope if s not in (scope, Scope.ADMIN))
    assert not grants(others, scope)


def test_scope_names_are_the_documented_strings() -> None:
    assert [s.value for s in Scope] == [
        "events:write", "events:read", "endpoints:read", "endpoints:write",
        "deliveries:read", "deliveries:write", "applications:read", "applications:write",
        "event-types:write", "admin",
    ]  # fmt: skip


def test_api_key_in_deduplicates_scopes_and_takes_a_rate() -> None:
    body = ApiKeyIn.model_validate(
        {"name": "billing", "scopes": ["events:write", "admin", "events:write"], "rate_limit": 5}
    )
    assert body.scopes == [Scope.ADMIN, Scope.EVENTS_WRITE]
    assert body.rate_limit == 5.0


@pytest.mark.parametrize(
    ("body", "pointer"),
    [
        ({"name": "x", "scopes": ["events:delete"]}, ("scopes", 0)),
        ({"name": "x", "scopes": []}, ("scopes",)),
        ({"name": "x"}, ("scopes",)),
        ({"name": "", "scopes": ["admin"]}, ("name",)),
        ({"name": "a\nb", "scopes": ["admin"]}, ("name",)),
        ({"name": "x", "scopes": ["admin"], "rate_limit": 0}, ("rate_limit",)),
        ({"name": "x", "scopes": ["admin"], "rate_limit": "5"}, ("rate_limit",)),
        ({"name": "x", "scopes": ["admin"], "key": "whk_mine"}, ("key",)),
    ],
)
def test_api_key_in_refuses(body: dict[str, Any], pointer: tuple[str | int, ...]) -> None:
    with pytest.raises(ValidationError) as caught:
        ApiKeyIn.model_validate(body)
    assert pointer in [error["loc"] for error in caught.value.errors()]
