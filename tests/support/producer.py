"""Producers as internal services run them: our own client, at a steady rate, over several
API processes; and every answer the client met on the way, its own retries included."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace

import aiohttp

from webhook_service.api.problems import CONTENT_TYPE as PROBLEM_CONTENT_TYPE
from webhook_service.client import AsyncWebhookClient, WebhookError


@dataclass
class Answers:
    """What the client's session saw, try by try: statuses, failures to get an answer, and
    any refusal that breaks the contract (a 429 or 503 must be problem+json with Retry-After)."""

    statuses: Counter[int] = field(default_factory=Counter)
    failures: Counter[str] = field(default_factory=Counter)  # exception class names
    bad_refusals: list[str] = field(default_factory=list)

    def trace(self) -> aiohttp.TraceConfig:
        config = aiohttp.TraceConfig()
        config.on_request_end.append(self._answered)
        config.on_request_exception.append(self._failed)
        return config

    async def _answered(
        self, _: aiohttp.ClientSession, __: SimpleNamespace, params: aiohttp.TraceRequestEndParams
    ) -> None:
        response = params.response
        self.statuses[response.status] += 1
        if response.status in (429, 503) and (
            response.content_type != PROBLEM_CONTENT_TYPE or "Retry-After" not in response.headers
        ):
            self.bad_refusals.append(f"{response.content_type} {dict(response.headers)}")

    async def _failed(
        self,
        _: aiohttp.ClientSession,
        __: SimpleNamespace,
        params: aiohttp.TraceRequestExceptionParams,
    ) -> None:
        self.failures[type(params.exception).__name__] += 1


@dataclass
class Production:
    accepted: list[str] = field(default_factory=list)  # event ids, each answered 202
    errors: list[WebhookError] = field(default_factory=list)  # sends the client gave up on
    # The longest one send took, retries included: how long an outage looked to a producer.
    slowest_send: float = 0.0


async def produce(
    clients: Sequence[AsyncWebhookClient],
    rate: float,
    stop: asyncio.Event,
    event_type: str,
    production: Production,
) -> None:
    """Event n goes out at ``n / rate`` seconds, through ``clients[n % len(clients)]``,
    whether or not earlier sends are still retrying; returns once ``stop`` is set and
    every send begun has ended."""
    sends: set[asyncio.Task[None]] = set()
    started = time.monotonic()
    n = 0
    while not stop.is_set():
        task = asyncio.create_task(_send(clients[n % len(clients)], event_type, n, production))
        sends.add(task)
        task.add_done_callback(sends.discard)
        n += 1
        delay = started + n / rate - time.monotonic()
        if delay > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)
    await asyncio.gather(*sends)


async def _send(
    client: AsyncWebhookClient, event_type: str, n: int, production: Production
) -> None:
    began = time.monotonic()
    try:
        production.accepted.append(await client.send("default", event_type, {"n": n}))
    except WebhookError as error:
        production.errors.append(error)
    production.slowest_send = max(production.slowest_send, time.monotonic() - began)
