"""Every route, while the store refuses: a problem document, never aiohttp's plain-text 500.

Each route of the app (API, tick, /metrics, dashboard) is called once while the module's
Valkey is busy with a long script (every command refused, reads too) and once while it is at
``maxmemory`` (writes refused, reads served). A refusal must come back as a 503 problem with
``Retry-After``; whatever else a route answers (a 404 for an id that does not exist, a
dashboard page), it is never a 500 and never text/plain, save /metrics' exposition format.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from pydantic import SecretStr

from tests.integration.conftest import (
    Api,
    create_endpoint,
    delivery_statuses,
    send_event,
    serve_api,
    settings_for,
    wait_for,
)
from tests.support.receiver import Receiver
from tests.support.stack import ADMIN_KEY, Stack
from tests.support.store_faults import PROBLEM, busy, full, sign_in

CRON_SECRET = "refusal-answers-cron-0123456789"
Fault = Callable[[str], AbstractContextManager[None]]


def _path(canonical: str, ids: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: ids.get(m[1], "x_none"), canonical)


# Bodies that get past validation, so the handler reaches the store.
_BODIES: dict[tuple[str, str], Any] = {
    ("POST", "/v1/events"): {"type": "refusal.answers", "data": {}},
    ("POST", "/v1/endpoints"): {"url": "http://127.0.0.1:9/nowhere"},
    ("POST", "/v1/api-keys"): {"name": "refused", "scopes": ["events:write"]},
}


def _wrong(path: str, response: aiohttp.ClientResponse, body: bytes) -> str | None:
    content_type = response.headers.get("Content-Type", "")
    if response.status >= 500 and response.status != 503:
        return f"{response.status} {body[:120]!r}"
    # /readyz names its checks, in JSON.
    problem = content_type.startswith(PROBLEM) and response.headers.get("Retry-After")
    if response.status == 503 and path != "/readyz" and not problem:
        return f"a 503 in {content_type!r} without a problem and Retry-After"
    if content_type.startswith("text/plain") and path != "/metrics":
        return f"{response.status} text/plain {body[:120]!r}"
    return None


@pytest.mark.parametrize("fault", [busy, full], ids=["busy", "maxmemory"])
async def test_every_route_answers_a_refusing_store_with_a_problem(
    stack: Stack, receiver: Receiver, fault: Fault
) -> None:
    settings = settings_for(stack).model_copy(update={"cron_secret": SecretStr(CRON_SECRET)})
    async with serve_api(settings) as (app, api):
        ids = await _a_delivered_event(api, receiver)
        jar = aiohttp.CookieJar(unsafe=True)
        async with aiohttp.ClientSession(cookie_jar=jar) as session:
            await sign_in(session, api.base)
            async with session.get(api.base + "/dashboard/deliveries") as page:
                token = re.search(r'name="csrf" value="([^"]+)"', await page.text())
            assert token is not None
            answers: dict[str, int] = {}
            wrong: list[str] = []
            with fault(stack.valkey.url):
                for method, path in _routes(app, ids):
                    status, problem = await _call(session, api.base, method, path, token[1])
                    answers[f"{method} {path}"] = status
                    if problem is not None:
                        wrong.append(f"{method} {path}: {problem}")
                metrics = await _metrics(session, api.base)
    assert not wrong, wrong
    refused = [route for route, status in answers.items() if status == 503]
    print(f"\n{len(refused)} of {len(answers)} routes answered 503: {refused}")
    # The dashboard acting through the API: the API's 503 is the page's.
    assert answers[f"POST /dashboard/deliveries/{ids['delivery_id']}/retry"] == 503
    assert answers["POST /v1/events"] == 503
    assert "webhook_store_refusals_total" in metrics
    if fault is busy:
        assert answers["GET /dashboard/deliveries"] == 503
        assert "webhook_store_readable 0.0" in metrics  # and yet answered
    else:
        assert answers["GET /v1/deliveries"] == 200
        assert "webhook_store_readable 1.0" in metrics


async def _a_delivered_event(api: Api, receiver: Receiver) -> dict[str, str]:
    """The id of a delivered delivery, for its retry routes; every other id names nothing
    (a full store still deletes: no route may remove what the other checks use)."""
    endpoint = await create_endpoint(api, receiver, "answers", ["refusal.answers"])
    event_id = await send_event(api, "refusal.answers", {"n": 1})

    async def delivered() -> bool:
        return await delivery_statuses(api, event_id) == {endpoint["id"]: "succeeded"}

    try:
        await wait_for(delivered)
        _, event, _ = await api.call("GET", f"/v1/events/{event_id}")
    finally:
        # The module's stack outlives the test: its next event must not come here too.
        await api.call("DELETE", f"/v1/endpoints/{endpoint['id']}")
    return {"delivery_id": event["deliveries"][0]["id"]}


def _routes(app: web.Application, ids: dict[str, str]) -> list[tuple[str, str]]:
    """Every route but the static files; signing out last (a full store still deletes)."""
    found = []
    for route in app.router.routes():
        resource = route.resource
        if route.method == "HEAD" or resource is None or "/static/" in resource.canonical:
            continue
        found.append((route.method, _path(resource.canonical, ids)))
    return sorted(found, key=lambda route: route[1] == "/dashboard/logout")


async def _call(
    session: aiohttp.ClientSession, base: str, method: str, path: str, csrf: str
) -> tuple[int, str | None]:
    headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
    kwargs: dict[str, Any] = {}
    if path.startswith("/dashboard"):
        headers = {}
        if method == "POST":
            kwargs["data"] = {"csrf": csrf, "key": ADMIN_KEY, "since": "2026-01-01T00:00"}
    elif path.startswith("/v1/cron"):
        headers = {"Authorization": f"Bearer {CRON_SECRET}"}
    elif method in ("POST", "PATCH"):
        kwargs["json"] = _BODIES.get((method, path), {})
    async with session.request(
        method, base + path, headers=headers, allow_redirects=False, **kwargs
    ) as response:
        body = await response.read()
        return response.status, _wrong(path, response, body)


async def _metrics(session: aiohttp.ClientSession, base: str) -> str:
    headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
    async with session.get(base + "/metrics", headers=headers) as response:
        assert response.status == 200
        return await response.text()
