"""The portal's pages against a fake API: one aiohttp server holding both the pages and a
stand-in for the /v1 routes they call (over HTTP to the server's own address, as in
production), which answers from a table and records every call. The session is given,
not entered: entering is session.py's and enter.py's, tested with them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from webhook_service import portal
from webhook_service.api.context import SERVICES, Services
from webhook_service.dashboard.access import http_session
from webhook_service.portal import views
from webhook_service.portal.session import PortalSession
from webhook_service.portal_access import Capability

APP_ID = "app_01PORTAL"
NOW = "2026-01-31T12:00:00.000Z"
APPLICATION: dict[str, Any] = {
    "id": APP_ID, "name": "Acme", "uid": "acme", "metadata": {}, "rate_limit": None,
    "portal_name": "Acme <Webhooks>", "portal_logo_url": "https://cdn.acme.example/logo.png",
    "portal_accent": "#aa3366", "portal_origins": ["https://acme.example"],
    "created_at": NOW, "updated_at": NOW,
}  # fmt: skip


def endpoint(endpoint_id: str = "ep_1", **fields: Any) -> dict[str, Any]:
    return {
        "id": endpoint_id, "application": APP_ID, "url": "https://hooks.acme.example/in",
        "description": "Orders", "event_types": ["invoice.paid"], "channels": None,
        "disabled": False, "disabled_reason": None, "disabled_at": None, "headers": {},
        "rate_limit": None, "operations": False, "signature": "hmac", "public_key": None,
        "created_at": NOW, "updated_at": NOW, **fields,
    }  # fmt: skip


def _window(attempts: int = 6, good: int = 5) -> dict[str, Any]:
    """One window as the stats API answers it (api/stats.py window_json)."""
    return {
        "deliveries": 5, "succeeded": 4, "failed": 1, "success_rate": 0.8,
        "attempts": attempts, "attempts_succeeded": good,
        "attempt_success_rate": good / attempts if attempts else None,
        "latency_ms": {"p50": 10.0 if attempts else None, "p95": 30.0 if attempts else None},
    }  # fmt: skip


def _minute(i: int) -> dict[str, Any]:
    return {"start": f"2026-01-31T11:{i:02d}:00.000Z", **_window(i % 4, i % 4 // 2)}


STATS = {
    "per_minute": [_minute(i) for i in range(60)], "last_hour": _window(),
    "last_day": _window(), "backlog": 2, "last_success_at": "2026-01-31T10:00:00.000Z",
    "last_failure": {"at": "2026-01-31T11:00:00.000Z", "status_code": 500, "error": None},
}  # fmt: skip
EVENT_TYPES: list[dict[str, Any]] = [
    {
        "name": "invoice.paid", "description": "An invoice was paid in full.",
        "schema": {"type": "object", "properties": {"amount": {"type": "integer"}}},
        "examples": [{"amount": 4200}], "group": "billing", "deprecated": False,
        "archived": False, "created_at": NOW, "updated_at": NOW,
    },
    {
        "name": "user.deleted", "description": "A user <left>.", "schema": None,
        "examples": [], "group": None, "deprecated": True, "archived": False,
        "created_at": NOW, "updated_at": NOW,
    },
]  # fmt: skip


def delivery(status: str = "failed", attempts: int = 1, logged: int = 1) -> dict[str, Any]:
    attempt = {
        "number": 1, "started_at": NOW, "duration_ms": 12, "status_code": 500, "error": None,
        "response_body": "nope", "request_headers": {"webhook-id": "msg_1"},
        "response_headers": {"content-type": "text/plain"},
    }  # fmt: skip
    return {
        "id": "dlv_1", "application": APP_ID, "event_id": "msg_1", "endpoint_id": "ep_1",
        "event_type": "invoice.paid", "status": status, "attempts": attempts,
        "next_attempt_at": None, "last_status_code": 500, "last_error": None,
        "created_at": NOW, "updated_at": NOW, "attempt_log": [attempt] * logged,
    }  # fmt: skip


def problem(status: int, kind: str, detail: str, errors: list[dict[str, str]] | None = None) -> Any:
    return status, {
        "type": f"https://webhook-service.dev/problems/{kind}", "title": kind, "status": status,
        "detail": detail, "errors": errors or [],
    }  # fmt: skip


@dataclass
class FakeApi:
    """Answers (method, path under /v1/applications/APP_ID or /v1) from ``answers``."""

    answers: dict[tuple[str, str], tuple[int, Any]] = field(default_factory=dict)
    calls: list[tuple[str, str, Any]] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        base = f"/v1/applications/{APP_ID}"
        listed = {"data": [endpoint()], "next_cursor": None}
        self.answers.update(
            {
                ("GET", base): (200, APPLICATION),
                ("GET", base + "/endpoints"): (200, listed),
                ("GET", base + "/endpoints/ep_1"): (200, endpoint()),
                ("GET", base + "/endpoints/ep_1/stats"): (200, STATS),
                ("GET", base + "/deliveries"): (200, {"data": [delivery()], "next_cursor": None}),
                ("GET", base + "/deliveries/dlv_1"): (200, delivery()),
                ("GET", base + "/events/msg_1"): (
                    200,
                    {
                        "id": "msg_1",
                        "type": "invoice.paid",
                        "timestamp": NOW,
                        "data": {"amount": 4200},
                        "deliveries": [],
                    },
                ),
                ("GET", "/v1/event-types"): (200, {"data": EVENT_TYPES, "next_cursor": None}),
            }
        )

    async def handle(self, request: web.Request) -> web.Response:
        body = orjson.loads(await request.read()) if request.can_read_body else None
        self.calls.append((request.method, request.path, body))
        self.keys.append(request.headers.get("Authorization", ""))
        status, answer = self.answers.get(
            (request.method, request.path), problem(404, "not-found", "none")
        )
        if status == 204:
            return web.Response(status=204)
        kind = "application/problem+json" if status >= 400 else "application/json"
        return web.Response(status=status, body=orjson.dumps(answer), content_type=kind)

    def posted(self, path_tail: str) -> list[Any]:
        full = f"/v1/applications/{APP_ID}{path_tail}"
        return [body for method, p, body in self.calls if method != "GET" and p == full]


ALL = frozenset(Capability)
SESSION_TOKEN = "form-token"


def session_with(capabilities: frozenset[Capability] = ALL) -> PortalSession:
    return PortalSession("whps_sealed", APP_ID, capabilities, SESSION_TOKEN, 0, "sid")


@dataclass
class Portal:
    client: TestClient[web.Request, web.Application]
    api: FakeApi
    session: PortalSession | None

    async def get(self, url: str) -> tuple[int, str, dict[str, str]]:
        async with self.client.get(url, allow_redirects=False) as response:
            return response.status, await response.text(), dict(response.headers)

    async def post(
        self, url: str, data: dict[str, Any] | list[tuple[str, str]] | None = None,
        token: str | None = SESSION_TOKEN,
    ) -> tuple[int, str, dict[str, str]]:  # fmt: skip
        fields = list(data.items()) if isinstance(data, dict) else list(data or [])
        if token is not None:
            fields.append(("csrf", token))
        async with self.client.post(url, data=fields, allow_redirects=False) as response:
            return response.status, await response.text(), dict(response.headers)


@pytest.fixture
async def make_portal(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Any]:
    clients: list[TestClient[web.Request, web.Application]] = []

    async def made(session: PortalSession | None = None) -> Portal:
        fake = FakeApi()

        async def current(_: web.Request) -> PortalSession | None:
            return session

        monkeypatch.setattr(views, "current", current)
        app = web.Application()
        # What reading a form needs of the services: its time limit.
        settings = SimpleNamespace(body_timeout=5.0)
        app[SERVICES] = cast(Services, SimpleNamespace(settings=settings))
        app.cleanup_ctx.append(http_session)
        portal.setup(app)
        app.router.add_route("*", "/v1/{tail:.*}", fake.handle)
        client = TestClient(TestServer(app, host="127.0.0.1"))
        await client.start_server()
        clients.append(client)
        return Portal(client, fake, session)

    yield made
    for client in clients:
        await client.close()
