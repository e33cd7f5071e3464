"""A real aiohttp receiver that verifies every request with the `standardwebhooks` package."""

from __future__ import annotations

import asyncio
import random
import ssl
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web
from multidict import CIMultiDict
from standardwebhooks.webhooks import Webhook

# Given the endpoint name and how many requests it has seen (1-based), the status to answer,
# or None to hang until the sender gives up.
Behaviour = Callable[[str, int], int | None]


def flaky(rng: random.Random, fail_rate: float, hang_rate: float = 0.0) -> Behaviour:
    """A receiver that hangs on ``hang_rate`` of requests and answers 500 to ``fail_rate``
    of them, at random; 200 to the rest."""

    def answer(_name: str, _seen: int) -> int | None:
        roll = rng.random()
        if roll < hang_rate:
            return None
        return 500 if roll < hang_rate + fail_rate else 200

    return answer


@dataclass
class Received:
    endpoint: str
    webhook_id: str
    body: bytes
    headers: dict[str, str]
    verified: bool
    at: float = field(default_factory=time.monotonic)
    status: int | None = None  # what we answered; None while hanging or never


@dataclass
class Receiver:
    secrets: dict[str, list[str]] = field(default_factory=dict)
    behaviours: dict[str, Behaviour] = field(default_factory=dict)
    hang: set[str] = field(default_factory=set)
    slow: dict[str, float] = field(default_factory=dict)  # seconds to wait before answering
    bodies: dict[str, str] = field(default_factory=dict)  # what to answer; else "answer <code>"
    # Header lines to answer with besides aiohttp's own, a name repeated as often as given.
    answer_headers: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    received: list[Received] = field(default_factory=list)
    # False: ``received`` stays empty, for runs too long to keep every request; the counts
    # below are kept either way.
    keep: bool = True
    requests: Counter[str] = field(default_factory=Counter)  # per endpoint
    # Verified requests answered 2xx, per (endpoint, webhook-id): more than 1 is a duplicate.
    taken: Counter[tuple[str, str]] = field(default_factory=Counter)
    # Requests being answered now, and the most there ever were at once, per endpoint.
    in_flight: dict[str, int] = field(default_factory=dict)
    peak_in_flight: dict[str, int] = field(default_factory=dict)
    port: int = 0
    # Set: it serves HTTPS with this context (a certificate of tests/support/tls.py).
    ssl_context: ssl.SSLContext | None = None
    _runner: web.AppRunner | None = None

    def url(self, name: str) -> str:
        scheme = "http" if self.ssl_context is None else "https"
        return f"{scheme}://127.0.0.1:{self.port}/hooks/{name}"

    def for_endpoint(self, name: str) -> list[Received]:
        return [r for r in self.received if r.endpoint == name]

    async def _handle(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        self.in_flight[name] = self.in_flight.get(name, 0) + 1
        self.peak_in_flight[name] = max(self.peak_in_flight.get(name, 0), self.in_flight[name])
        try:
            return await self._answer(name, request)
        finally:
            self.in_flight[name] -= 1

    async def _answer(self, name: str, request: web.Request) -> web.Response:
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
        got = Received(name, headers.get("webhook-id", ""), body, headers, verified)
        if self.keep:
            self.received.append(got)
        self.requests[name] += 1
        status: int | None = 401
        if verified:
            behaviour = self.behaviours.get(name)
            status = 200 if behaviour is None else behaviour(name, self.requests[name])
        if name in self.hang or status is None:
            await asyncio.sleep(3600)
        # A None status hangs until the sender gives up (the handler is cancelled then).
        assert status is not None, "hung an hour with no status to answer"
        await asyncio.sleep(self.slow.get(name, 0.0))
        got.status = status
        if verified and 200 <= status < 300:
            self.taken[(name, got.webhook_id)] += 1
        return web.Response(
            status=status,
            text=self.bodies.get(name, f"answer {status}"),
            headers=CIMultiDict(self.answer_headers.get(name, [])),
        )

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/hooks/{name}", self._handle)
        # On stop, a request still hanging (a test's hang set) is cut after a second rather
        # than aiohttp's 60 s grace: the sender would otherwise hold it to its own timeout,
        # and a test's teardown waited that long (20 s in test_endpoint_health).
        self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self.ssl_context)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
