"""Every route the app registers, as the router lists it (so routes added later are covered
with no change here), against keys with and without the scope ROUTE_SCOPES gives it."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml
from aiohttp import web

from tests.integration.conftest import Api, serve_api, settings_for
from tests.integration.test_openapi import SPEC_FILE
from tests.support.apikeys import all_but, make_key
from tests.support.stack import Stack
from webhook_service.api.routing import flat_path
from webhook_service.api.scopes import ROUTE_SCOPES, Scope, required_scope

Route = tuple[str, str]  # (method, canonical path)


@pytest.fixture
async def served(stack: Stack) -> AsyncIterator[tuple[web.Application, Api]]:
    async with serve_api(settings_for(stack)) as running:
        yield running


def registered(app: web.Application) -> list[Route]:
    return sorted(
        {
            (route.method, route.resource.canonical)
            for route in app.router.routes()
            if route.resource is not None
        }
    )


async def call(api: Api, method: str, url: str, key: str | None) -> tuple[int, Any, str]:
    """Status, problem (when the answer is one) and challenge; other bodies are not read."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with api.session.request(method, api.base + url, headers=headers) as response:
        problem = None
        if response.content_type == "application/problem+json" and method != "HEAD":
            problem = await response.json(content_type=None)
        return response.status, problem, response.headers.get("WWW-Authenticate", "")


def concrete(path: str) -> str:
    """A path the route matches, every parameter filled with an id that does not exist."""
    return re.sub(r"\{[^}]+\}", "0", path)


def test_the_app_has_routes_to_check(served: tuple[web.Application, Api]) -> None:
    routes = registered(served[0])
    assert ("POST", "/v1/events") in routes
    assert ("HEAD", "/v1/endpoints") in routes  # aiohttp's implicit HEAD is covered too
    assert len(routes) >= 20


def test_every_route_has_its_own_entry(served: tuple[web.Application, Api]) -> None:
    # A route nested under an application is its flat form's (api/routing.py).
    missing = [
        (method, path)
        for method, path in registered(served[0])
        if ("GET" if method == "HEAD" else method, flat_path(path)) not in ROUTE_SCOPES
    ]
    assert not missing, f"add these to ROUTE_SCOPES (unlisted routes need admin): {missing}"


def test_every_entry_names_a_route(served: tuple[web.Application, Api]) -> None:
    routes = set(registered(served[0]))
    stale = [entry for entry in ROUTE_SCOPES if entry not in routes]
    assert not stale, f"ROUTE_SCOPES entries without a route: {stale}"


async def test_scope_matrix(served: tuple[web.Application, Api]) -> None:
    app, api = served
    only = {scope: (await make_key(api, [scope]))["key"] for scope in Scope}
    lacking = {scope: (await make_key(api, all_but(scope)))["key"] for scope in Scope}
    failures: list[str] = []
    checked = 0
    for method, path in registered(app):
        needed = required_scope(method, path)
        if needed is None:
            continue
        checked += 1
        url = concrete(path)
        status, problem, challenge = await call(api, method, url, lacking[needed])
        if status != 403:
            failures.append(f"{method} {path} without {needed}: {status}, expected 403")
        elif method != "HEAD" and not problem["type"].endswith("/insufficient-scope"):
            failures.append(f"{method} {path} without {needed}: {problem}")
        elif f'scope="{needed}"' not in challenge:
            failures.append(f"{method} {path}: no insufficient_scope challenge")
        status, _, _ = await call(api, method, url, only[needed])
        if status in (401, 403):
            failures.append(f"{method} {path} with only {needed}: {status}")
        status, _, _ = await call(api, method, url, None)
        if status != 401:
            failures.append(f"{method} {path} with no key: {status}, expected 401")
    assert checked >= 20
    assert not failures, "\n".join(failures)


async def test_public_routes_need_no_api_key(served: tuple[web.Application, Api]) -> None:
    app, api = served
    public = [(m, p) for m, p in registered(app) if required_scope(m, p) is None]
    assert ("GET", "/healthz") in public
    for method, path in public:
        status, problem, _ = await call(api, method, concrete(path), None)
        # A public route may check a credential of its own, never an API key. (A page's
        # 401 is a page: the portal's for a link or session it does not take.)
        assert status != 403, (method, path)
        assert status != 401 or problem is None or "API key" not in problem["detail"], (
            method,
            path,
        )


async def test_an_unknown_path_is_404_for_any_valid_key_and_401_without(
    served: tuple[web.Application, Api],
) -> None:
    _, api = served
    key = (await make_key(api, ["events:read"]))["key"]
    assert (await call(api, "GET", "/v1/nothing-here", key))[0] == 404
    assert (await call(api, "PUT", "/v1/events", key))[0] == 405
    assert (await call(api, "GET", "/v1/nothing-here", None))[0] == 401


def test_the_contract_names_each_operations_scope() -> None:
    spec = yaml.safe_load(SPEC_FILE.read_text())
    wrong = []
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            if method not in ("get", "post", "put", "patch", "delete"):
                continue
            scope = required_scope(method.upper(), path)
            forbidden = operation["responses"].get("403")
            if scope is None and forbidden is not None:
                wrong.append(f"{method} {path} is public but documents a 403")
            if scope is not None and f"`{scope}`" not in (forbidden or {}).get("description", ""):
                wrong.append(f"{method} {path}: its 403 must say it needs `{scope}`")
    assert not wrong, "\n".join(wrong)
