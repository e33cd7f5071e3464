"""The portal's way in and its principal in the API (issue 17 items 2 and 4), against the
real API and Valkey: a link exchanged at /portal/enter for a session cookie, that session's
credential against every route the router has, and every way a session ends."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp import web
from redis.asyncio import Redis

from tests.integration.conftest import Api, serve_api, settings_for
from tests.integration.test_applications import new_app, two_tenants
from tests.integration.test_event_types import create, fresh
from tests.support.stack import Stack
from webhook_service.api.portal_routes import PORTAL_ROUTES, required_capability
from webhook_service.api.scopes import required_scope
from webhook_service.crypto import SecretBox
from webhook_service.portal.session import COOKIE
from webhook_service.portal_access import Capability, open_credential
from webhook_service.store.portal import PortalStore
from webhook_service.timeutil import now_ms
from webhook_service.wiring import secret_box

__all__ = ["two_tenants"]  # the fixture: one of everything in each of two applications

Refs = dict[str, str]


@dataclass(frozen=True)
class Entered:
    """What a browser holds after following a portal link."""

    credential: str
    csrf: str
    set_cookie: str


async def enter(
    api: Api, box: SecretBox, token: str, headers: dict[str, str] | None = None
) -> Entered:
    """Follow a portal link as a browser would, up to the redirect that drops the token."""
    async with api.session.get(
        f"{api.base}/portal/enter", params={"token": token}, headers=headers,
        allow_redirects=False,
    ) as response:  # fmt: skip
        assert response.status == 303, await response.text()
        assert response.headers["Location"] == "/portal"
        assert response.headers["Referrer-Policy"] == "no-referrer"
        assert response.headers["Cache-Control"] == "no-store"
        credential = response.cookies[COOKIE].value
        set_cookie = response.headers["Set-Cookie"]
    assert credential.startswith("whps_")
    # The form token a page shows; the test reads it where the page's server does.
    claims = open_credential(box, credential)
    assert claims is not None
    return Entered(credential, claims.csrf, set_cookie)


def _attributes(entered: Entered) -> list[str]:
    """Its session cookie's attributes, lower case (the name=value pair first)."""
    return [part.strip().lower() for part in entered.set_cookie.split(";")]


async def _entry_status(api: Api, token: str) -> int:
    """What /portal/enter answers ``token`` with (303: a session)."""
    async with api.session.get(
        f"{api.base}/portal/enter", params={"token": token}, allow_redirects=False
    ) as response:
        return response.status


async def portal_link(api: Api, app: str, **body: Any) -> str:
    status, made, _ = await api.call("POST", f"/v1/applications/{app}/portal-access", json=body)
    assert status == 201, made
    token: str = made["token"]
    return token


@pytest.fixture
async def portal_api(stack: Stack) -> AsyncIterator[tuple[web.Application, Api]]:
    async with serve_api(settings_for(stack)) as (app, api):
        yield app, api


@pytest.fixture
def box(stack: Stack) -> SecretBox:
    """The API's own keyring: what seals a session, opened here to read its form token."""
    return secret_box(settings_for(stack))


@pytest.fixture
async def portal(stack: Stack) -> AsyncIterator[PortalStore]:
    client = Redis.from_url(stack.valkey.url, decode_responses=True)
    yield PortalStore(client)
    await client.aclose()


def _routes(app: web.Application) -> list[tuple[str, str]]:
    return sorted(
        {
            (r.method, r.resource.canonical)
            for r in app.router.routes()
            if r.resource is not None and r.method != "HEAD"
        }
    )


def _fill(path: str, refs: Refs, app_ref: str) -> str:
    """The path with the application and its records; what it has none of (an API key's
    id) with an id that names nothing."""
    return re.sub(
        r"\{([^}]+)\}",
        lambda m: app_ref if m.group(1) == "app" else refs.get(m.group(1), "0"),
        path,
    )


def _of_an_application(path: str) -> bool:
    """A route whose answer is one application's: all but the global catalog's."""
    return not path.startswith("/v1/event-types")


async def _answer(api: Api, method: str, url: str, credential: str) -> tuple[int, Any]:
    status, body, _ = await api.call(method, url, key=credential)
    return status, body


async def test_a_portal_session_reaches_its_own_application_alone_on_every_route(
    portal_api: tuple[web.Application, Api], two_tenants: tuple[Refs, Refs, str], box: SecretBox
) -> None:
    app, api = portal_api
    mine, theirs, _ = two_tenants
    name = fresh("portal.matrix")
    await create(api, name=name, description="For the portal's route matrix.")
    mine, theirs = {**mine, "name": name}, {**theirs, "name": name}
    every = await enter(
        api, box, await portal_link(api, mine["app"], capabilities=list(Capability))
    )
    viewer = await enter(api, box, await portal_link(api, mine["uid"], read_only=True))
    failures: list[str] = []
    checked = {"outside": 0, "theirs": 0, "missing-capability": 0, "own": 0}
    for method, path in _routes(app):
        if required_scope(method, path) is None:
            continue  # no API key is checked there (the portal's and dashboard's pages)
        needed = required_capability(method, path)
        own = _fill(path, mine, mine["uid"])
        if needed is None:
            # Outside PORTAL_ROUTES: missing, whatever ids it names, however much is held.
            status, body = await _answer(api, method, own, every.credential)
            checked["outside"] += 1
            if status != 404:
                failures.append(f"{method} {own} (not a portal route): {status} {body}")
            continue
        if _of_an_application(path):
            # The other application's, by its id and by its uid; and its records under
            # this one's name.
            urls = {_fill(path, theirs, theirs["app"]), _fill(path, theirs, theirs["uid"])}
            if "{" in path.replace("{app}", ""):
                urls.add(_fill(path, theirs, mine["app"]))
            for url in sorted(urls):
                status, body = await _answer(api, method, url, every.credential)
                checked["theirs"] += 1
                if status != 404:
                    failures.append(f"{method} {url} (another application's): {status} {body}")
        if needed is not Capability.VIEW:
            status, body = await _answer(api, method, own, viewer.credential)
            checked["missing-capability"] += 1
            if status != 403 or not body["type"].endswith("/missing-capability"):
                failures.append(f"{method} {own} without {needed}: {status} {body}")
        if method == "GET":
            # Its own: there, so the 404s above were for another application only.
            for credential in (every.credential, viewer.credential):
                status, body = await _answer(api, method, own, credential)
                checked["own"] += 1
                wanted = 200 if needed is Capability.VIEW or credential == every.credential else 403
                if status != wanted:
                    failures.append(f"{method} {own} (its own): {status} {body}")
    assert not failures, "\n".join(failures)
    # Every table entry is a route, and each kind of check ran.
    routes = set(_routes(app))
    assert set(PORTAL_ROUTES) <= routes, set(PORTAL_ROUTES) - routes
    assert checked["outside"] >= 20 and checked["theirs"] >= 40, checked
    assert checked["missing-capability"] >= 10 and checked["own"] >= 20, checked


async def test_entering_sets_a_strict_session_cookie_for_the_portal_only(
    portal_api: tuple[web.Application, Api], box: SecretBox
) -> None:
    _, api = portal_api
    application = await new_app(api, "Portal cookie")
    token = await portal_link(api, application["id"])
    entered = await enter(api, box, token)
    attributes = _attributes(entered)
    assert {"httponly", "path=/portal", "samesite=strict"} <= set(attributes), attributes
    assert "secure" not in attributes  # plain http: a Secure cookie would never come back
    max_age = next(int(a.split("=")[1]) for a in attributes if a.startswith("max-age="))
    assert 3500 < max_age <= 3600
    # Behind a TLS-terminating proxy: Secure, still Strict (the application frames nothing).
    behind = await enter(api, box, token, headers={"X-Forwarded-Proto": "https"})
    attributes = _attributes(behind)
    assert {"secure", "samesite=strict"} <= set(attributes), attributes
    # The link is not used up, and each entry is a session of its own.
    assert behind.credential != entered.credential


async def test_a_portal_its_application_frames_gets_a_cookie_that_works_framed(
    portal_api: tuple[web.Application, Api], box: SecretBox
) -> None:
    _, api = portal_api
    application = await new_app(api, "Portal framed", portal_origins=["https://app.example.com"])
    token = await portal_link(api, application["id"])
    # A framed portal is a third-party context: Strict (or Lax) cookies are not sent there.
    framed = await enter(api, box, token, headers={"X-Forwarded-Proto": "https"})
    attributes = _attributes(framed)
    assert {"samesite=none", "secure", "httponly", "path=/portal"} <= set(attributes)
    # SameSite=None needs Secure, which plain http cannot keep: Strict there.
    plain = await enter(api, box, token)
    attributes = _attributes(plain)
    assert "samesite=strict" in attributes and "secure" not in attributes


@pytest.mark.parametrize("token", ["", "whp_nothing", "whk_x", "whp_app_default." + "A" * 43])
async def test_a_wrong_link_opens_nothing(
    portal_api: tuple[web.Application, Api], token: str
) -> None:
    _, api = portal_api
    async with api.session.get(
        f"{api.base}/portal/enter", params={"token": token}, allow_redirects=False
    ) as response:
        assert response.status == 401
        assert response.content_type == "text/html"
        assert "Set-Cookie" not in response.headers
        assert response.headers["Referrer-Policy"] == "no-referrer"
        assert "expired" in await response.text()


async def _portal_works(api: Api, app_id: str, credential: str) -> int:
    status, _, _ = await api.call("GET", f"/v1/applications/{app_id}/endpoints", key=credential)
    return status


async def test_an_expired_grant_ends_its_sessions(
    portal_api: tuple[web.Application, Api], portal: PortalStore, box: SecretBox
) -> None:
    _, api = portal_api
    application = await new_app(api, "Portal expiry")
    expires_ms = now_ms() + 1500
    token = await portal.grant(application["id"], frozenset({Capability.VIEW}), expires_ms)
    entered = await enter(api, box, token)
    assert await _portal_works(api, application["id"], entered.credential) == 200
    await asyncio.sleep(max(0.0, (expires_ms - now_ms()) / 1000) + 0.1)
    assert await _portal_works(api, application["id"], entered.credential) == 401
    assert await _entry_status(api, token) == 401


async def test_revoking_ends_every_session_of_the_application_at_once(
    portal_api: tuple[web.Application, Api], box: SecretBox
) -> None:
    _, api = portal_api
    mine = await new_app(api, "Portal revoked sessions")
    theirs = await new_app(api, "Portal kept sessions")
    token = await portal_link(api, mine["id"])
    sessions = [await enter(api, box, token) for _ in range(2)]
    kept = await enter(api, box, await portal_link(api, theirs["id"]))
    status, _, _ = await api.call("DELETE", f"/v1/applications/{mine['id']}/portal-access")
    assert status == 204
    for session in sessions:
        status, problem, headers = await api.call(
            "GET", f"/v1/applications/{mine['id']}/endpoints", key=session.credential
        )
        assert status == 401 and headers["WWW-Authenticate"] == "Bearer", problem
    assert await _portal_works(api, theirs["id"], kept.credential) == 200
    assert await _entry_status(api, token) == 401


async def _logout(api: Api, entered: Entered, form: dict[str, str], **headers: str) -> int:
    async with api.session.post(
        f"{api.base}/portal/logout", data=form, allow_redirects=False,
        headers={"Cookie": f"{COOKIE}={entered.credential}", **headers},
    ) as response:  # fmt: skip
        if response.status == 303:
            assert response.headers["Location"] == "/portal/signed-out"
            assert response.cookies[COOKIE].value == ""
        return response.status


async def test_signing_out_ends_the_session_server_side(
    portal_api: tuple[web.Application, Api], box: SecretBox
) -> None:
    _, api = portal_api
    application = await new_app(api, "Portal sign-out")
    entered = await enter(api, box, await portal_link(api, application["id"]))
    ours = {"Origin": api.base}
    # A cross-site form, or one without the session's token, ends nothing.
    assert await _logout(api, entered, {"csrf": entered.csrf}, Origin="https://evil.example") == 403
    assert await _logout(api, entered, {}, **ours) == 403
    assert await _logout(api, entered, {"csrf": "guess"}, **ours) == 403
    # A sandboxed frame elsewhere sends Origin: null too, but never as same-origin.
    null = {"Origin": "null", "Sec-Fetch-Site": "cross-site"}
    assert await _logout(api, entered, {"csrf": entered.csrf}, **null) == 403
    assert await _portal_works(api, application["id"], entered.credential) == 200
    assert await _logout(api, entered, {"csrf": entered.csrf}, **ours) == 303
    # Every copy of the cookie is refused from now on, by the API as by the portal.
    assert await _portal_works(api, application["id"], entered.credential) == 401
    async with api.session.get(f"{api.base}/portal/signed-out") as response:
        assert response.status == 200 and "signed out" in await response.text()
        assert response.headers["Referrer-Policy"] == "no-referrer"
    # Signing out again, with no session left, lands there too.
    assert await _logout(api, entered, {}, **ours) == 303


async def test_our_own_form_under_no_referrer_signs_out(
    portal_api: tuple[web.Application, Api], box: SecretBox
) -> None:
    # Referrer-Policy no-referrer (every portal page) makes a browser send "Origin: null"
    # with the page's own forms; Sec-Fetch-Site says they are ours.
    _, api = portal_api
    application = await new_app(api, "Portal own form")
    entered = await enter(api, box, await portal_link(api, application["id"]))
    ours = {"Origin": "null", "Sec-Fetch-Site": "same-origin"}
    assert await _logout(api, entered, {"csrf": entered.csrf}, **ours) == 303
    assert await _portal_works(api, application["id"], entered.credential) == 401


async def test_entering_again_ends_the_browsers_previous_session(
    portal_api: tuple[web.Application, Api], box: SecretBox
) -> None:
    _, api = portal_api
    first_app = await new_app(api, "Portal first")
    second_app = await new_app(api, "Portal second")
    first = await enter(api, box, await portal_link(api, first_app["id"]))
    second = await enter(
        api,
        box,
        await portal_link(api, second_app["id"]),
        headers={"Cookie": f"{COOKIE}={first.credential}"},
    )
    assert await _portal_works(api, first_app["id"], first.credential) == 401
    assert await _portal_works(api, second_app["id"], second.credential) == 200


async def test_a_link_token_is_no_bearer_key_and_a_credential_no_link(
    portal_api: tuple[web.Application, Api], box: SecretBox
) -> None:
    _, api = portal_api
    application = await new_app(api, "Portal credentials apart")
    token = await portal_link(api, application["id"])
    assert await _portal_works(api, application["id"], token) == 401
    entered = await enter(api, box, token)
    assert await _entry_status(api, entered.credential) == 401
    # A forged or cut credential is no session either.
    assert await _portal_works(api, application["id"], entered.credential[:-6]) == 401
    assert await _portal_works(api, application["id"], "whps_" + "A" * 200) == 401
