"""A real aiohttp receiver that verifies every request with the `standardwebhooks` package."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web
from standardwebhooks.webhooks import Webhook

# Given the endpoint name and how many requests it has seen (1-based), the status to answer.
Behaviour = Callable[[str, int], int]


@dataclass
class Received:
    endpoint: str
    webhook_id: str
    body: bytes
    headers: dict[str, str]
    verified: bool


@dataclass
class Receiver:
    secrets: dict[str, list[str]] = field(default_factory=dict)
    behaviours: dict[str, Behaviour] = field(default_factory=dict)
    hang: set[str] = field(default_factory=set)
    received: list[Received] = field(default_factory=list)
    port: int = 0
    _runner: web.AppRunner | None = None

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/{name}"

    def for_endpoint(self, name: str) -> list[Received]:
        return [r for r in self.received if r.endpoint == name]

    async def _handle(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        body = await request.read()
        headers = dict(request.headers)
        verified = False
        for secret in self.secrets.get(name, []):
            try:
                Webhook(secret).verify(body, headers)
                verified = True
                break
            except Exception:  # noqa: S112 - any failure means "not this secret"
                continue
        self.received.append(Received(name, headers.get("webhook-id", ""), body, headers, verified))
        if name in self.hang:
            await asyncio.sleep(3600)
        if not verified:
            return web.Response(status=401, text="bad signature")
        seen = len(self.for_endpoint(name))
        status = self.behaviours.get(name, lambda _n, _i: 200)(name, seen)
        return web.Response(status=status, text=f"answer {status}")

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/hooks/{name}", self._handle)
        self._runner = web.AppRunner(app, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
