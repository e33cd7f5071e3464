"""Portal links (issue 17 item 2): made and revoked through the real API, read back with the
store the portal's entry uses (store/portal.py), against the stack's Valkey."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from redis.asyncio import Redis

from tests.integration.conftest import Api, serve_api, settings_for
from tests.integration.test_applications import new_app
from tests.support.apikeys import make_key
from tests.support.stack import ADMIN_KEY, Stack
from webhook_service.portal_access import DEFAULT_CAPABILITIES, Capability, token_digest
from webhook_service.store import keys
from webhook_service.store.portal import PortalStore
from webhook_service.timeutil import now_ms, parse_iso


@pytest.fixture
async def portal(stack: Stack) -> AsyncIterator[PortalStore]:
    client = Redis.from_url(stack.valkey.url, decode_responses=True)
    yield PortalStore(client)
    await client.aclose()


async def link(api: Api, app: str, key: str = ADMIN_KEY, **body: Any) -> dict[str, Any]:
    status, made, headers = await api.call(
        "POST", f"/v1/applications/{app}/portal-access", json=body, key=key
    )
    assert status == 201, made
    assert headers["Cache-Control"] == "no-store"
    answer: dict[str, Any] = made
    return answer


async def test_a_link_opens_its_application_with_the_default_capabilities(
    api: Api, portal: PortalStore
) -> None:
    app = await new_app(api, "Portal defaults", uid="portal-defaults")
    before = now_ms()
    made = await link(api, "portal-defaults")
    after = now_ms()
    url = urlsplit(made["url"])
    assert f"{url.scheme}://{url.netloc}" == api.base and url.path == "/portal/enter"
    assert parse_qs(url.query) == {"token": [made["token"]]}
    assert made["token"].startswith(f"whp_{app['id']}.")
    assert before + 3_600_000 - 1000 <= parse_iso(made["expires_at"]) <= after + 3_600_000
    assert set(made["capabilities"]) == DEFAULT_CAPABILITIES
    grant = await portal.redeem(made["token"])
    assert grant is not None and grant.app_id == app["id"]
    assert grant.capabilities == DEFAULT_CAPABILITIES
    # No body at all: the same defaults.
    status, bare, _ = await api.call("POST", f"/v1/applications/{app['id']}/portal-access")
    assert status == 201 and set(bare["capabilities"]) == DEFAULT_CAPABILITIES, bare


async def test_capabilities_read_only_and_expiry_are_as_asked(
    api: Api, portal: PortalStore
) -> None:
    app = await new_app(api, "Portal choices")
    made = await link(api, app["id"], capabilities=["view_secrets"], expires_in=60)
    assert made["capabilities"] == ["view", "view_secrets"]
    grant = await portal.redeem(made["token"])
    assert grant is not None
    assert grant.capabilities == {Capability.VIEW, Capability.VIEW_SECRETS}
    assert grant.expires_ms == parse_iso(made["expires_at"])
    made = await link(api, app["id"], capabilities=["retry"], read_only=True, expires_in=604_800)
    assert made["capabilities"] == ["view"]
    assert parse_iso(made["expires_at"]) > now_ms() + 604_000_000


@pytest.mark.parametrize(
    ("body", "pointer"),
    [
        ({"expires_in": 59}, "/expires_in"),
        ({"expires_in": 604_801}, "/expires_in"),
        ({"expires_in": "3600"}, "/expires_in"),
        ({"capabilities": ["admin"]}, "/capabilities/0"),
        ({"read_only": "yes"}, "/read_only"),
        ({"scopes": ["view"]}, "/scopes"),
    ],
)
async def test_a_wrong_request_is_a_422_naming_the_field(
    api: Api, body: dict[str, Any], pointer: str
) -> None:
    app = await new_app(api, "Portal refusals")
    status, problem, _ = await api.call(
        "POST", f"/v1/applications/{app['id']}/portal-access", json=body
    )
    assert status == 422, problem
    assert problem["errors"][0]["pointer"] == pointer, problem


async def test_the_public_url_setting_starts_every_link(stack: Stack) -> None:
    settings = settings_for(stack).model_copy(update={"public_url": "https://hooks.example.com"})
    async with serve_api(settings) as (_, api):
        app = await new_app(api, "Portal public url")
        made = await link(api, app["id"])
        assert made["url"] == f"https://hooks.example.com/portal/enter?token={made['token']}"


async def test_redis_keeps_a_hash_of_the_token_in_the_applications_bucket(
    api: Api, stack: Stack
) -> None:
    app = await new_app(api, "Portal storage")
    made = await link(api, app["id"])
    secret = made["token"].split(".", 1)[1]
    client = Redis.from_url(stack.valkey.url, decode_responses=True)
    try:
        found = [k async for k in client.scan_iter(match=f"{keys.PREFIX}*portal*{app['id']}*")]
        assert found == [keys.portal_grant(app["id"], token_digest(made["token"]))]
        assert keys.bucket_of_key(found[0]) == keys.bucket_of(app["id"])
        record = await client.hgetall(found[0])
        assert secret not in str(record) and secret not in found[0]
        assert 0 < await client.pttl(found[0]) <= 3_600_000
    finally:
        await client.aclose()


async def test_the_token_is_never_an_api_key(api: Api) -> None:
    app = await new_app(api, "Portal not a key")
    made = await link(api, app["id"])
    for method, path in (
        ("GET", f"/v1/applications/{app['id']}"),
        ("GET", f"/v1/applications/{app['id']}/endpoints"),
        ("POST", f"/v1/applications/{app['id']}/portal-access"),
    ):
        status, problem, headers = await api.call(method, path, key=made["token"])
        assert status == 401, (path, problem)
        assert made["token"] not in str(problem) and headers["WWW-Authenticate"] == "Bearer"


async def test_revoking_ends_every_link_of_that_application_only(
    api: Api, portal: PortalStore
) -> None:
    mine = await new_app(api, "Portal revoked")
    theirs = await new_app(api, "Portal untouched")
    tokens = [(await link(api, mine["id"]))["token"] for _ in range(3)]
    kept = (await link(api, theirs["id"]))["token"]
    status, body, _ = await api.call("DELETE", f"/v1/applications/{mine['id']}/portal-access")
    assert status == 204 and body is None
    for token in tokens:
        assert await portal.redeem(token) is None
    assert await portal.redeem(kept) is not None
    # A link made after the revocation works.
    fresh = (await link(api, mine["id"]))["token"]
    assert await portal.redeem(fresh) is not None


async def test_an_expired_or_unknown_token_redeems_nothing(api: Api, portal: PortalStore) -> None:
    app = await new_app(api, "Portal expiry")
    at = now_ms()
    expired = await portal.grant(app["id"], frozenset({Capability.VIEW}), at - 1)
    assert await portal.redeem(expired) is None
    live = await portal.grant(app["id"], frozenset({Capability.VIEW}), at + 60_000)
    assert await portal.redeem(live) is not None
    for token in (live[:-1] + ("A" if live[-1] != "A" else "B"), "whp_nothing", "", "whp_app_x.y"):
        assert await portal.redeem(token) is None
    # The same secret under another application's name is another token: no grant.
    other = await new_app(api, "Portal other")
    assert await portal.redeem(live.replace(app["id"], other["id"])) is None


async def test_who_may_make_links(api: Api) -> None:
    mine = await new_app(api, "Portal bound", uid="portal-bound")
    theirs = await new_app(api, "Portal elsewhere")
    bound = (await make_key(api, ["applications:write"], application=mine["id"]))["key"]
    made = await link(api, "portal-bound", key=bound)
    assert made["token"].startswith(f"whp_{mine['id']}.")
    for method in ("POST", "DELETE"):
        status, _, _ = await api.call(
            method, f"/v1/applications/{theirs['id']}/portal-access", key=bound
        )
        assert status == 404
    reader = (await make_key(api, ["applications:read", "endpoints:write"]))["key"]
    status, problem, _ = await api.call(
        "POST", f"/v1/applications/{mine['id']}/portal-access", key=reader
    )
    assert status == 403 and problem["type"].endswith("/insufficient-scope"), problem
    status, _, _ = await api.call("POST", "/v1/applications/app_nothing/portal-access")
    assert status == 404
    # The flat form: the default application's, or a bound key's own.
    status, flat, _ = await api.call("POST", "/v1/portal-access", json={}, key=bound)
    assert status == 201 and flat["token"].startswith(f"whp_{mine['id']}."), flat
    status, flat, _ = await api.call("POST", "/v1/portal-access", json={})
    assert status == 201 and flat["token"].startswith("whp_app_default."), flat


PORTAL_LOOK = {
    "portal_origins": ["https://App.Example.com", "https://shop.example:8443"],
    "portal_name": "Acme webhooks",
    "portal_logo_url": "https://cdn.example/acme.svg",
    "portal_accent": "#0a7d5a",
}


async def test_an_applications_portal_look_is_set_shown_and_cleared(api: Api) -> None:
    made = await new_app(api, "Portal look", **PORTAL_LOOK)
    shown = {k: made[k] for k in PORTAL_LOOK}
    assert shown == {
        **PORTAL_LOOK, "portal_origins": ["https://app.example.com", "https://shop.example:8443"]
    }  # fmt: skip
    status, got, _ = await api.call("GET", f"/v1/applications/{made['id']}")
    assert status == 200 and {k: got[k] for k in PORTAL_LOOK} == shown
    # A patch changes what it names and keeps the rest; null (or no origins) clears.
    status, patched, _ = await api.call(
        "PATCH", f"/v1/applications/{made['id']}",
        json={"portal_accent": None, "portal_origins": []},
    )  # fmt: skip
    assert status == 200, patched
    assert (patched["portal_accent"], patched["portal_origins"]) == (None, None)
    assert patched["portal_name"] == "Acme webhooks"
    # Unset on a new application.
    plain = await new_app(api, "Portal plain")
    assert all(plain[k] is None for k in PORTAL_LOOK)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("portal_origins", ["http://app.example.com"]),
        ("portal_origins", ["https://app.example.com/path"]),
        ("portal_origins", ["https://a.example; script-src *"]),
        ("portal_origins", ["https://a.example:99999"]),
        ("portal_origins", [f"https://a{n}.example" for n in range(11)]),
        ("portal_origins", "https://a.example"),
        ("portal_name", ""),
        ("portal_name", "x" * 101),
        ("portal_name", "bell\u0007"),
        ("portal_logo_url", "http://cdn.example/a.png"),
        ("portal_logo_url", "https://cdn.example/a b.png"),
        ("portal_logo_url", 'https://cdn.example/"onerror=x'),
        ("portal_accent", "green"),
        ("portal_accent", "#12345"),
    ],
)
async def test_a_wrong_portal_field_is_a_422(api: Api, field: str, value: Any) -> None:
    status, problem, _ = await api.call(
        "POST", "/v1/applications", json={"name": "Portal wrong", field: value}
    )
    assert status == 422, problem
    assert problem["errors"][0]["pointer"].startswith(f"/{field}"), problem


async def test_a_bound_key_brands_its_portal_but_never_frames_it(api: Api) -> None:
    made = await new_app(api, "Portal tenant")
    bound = (await make_key(api, ["applications:write"], application=made["id"]))["key"]
    path = f"/v1/applications/{made['id']}"
    status, patched, _ = await api.call(
        "PATCH", path, json={"portal_name": "Ours", "portal_accent": "#000000"}, key=bound
    )
    assert status == 200 and patched["portal_name"] == "Ours", patched
    status, problem, _ = await api.call(
        "PATCH", path, json={"portal_origins": ["https://evil.example"]}, key=bound
    )
    assert status == 403 and problem["type"].endswith("/bound-key"), problem
    status, got, _ = await api.call("GET", path)
    assert got["portal_origins"] is None
