"""The whole outbound HTTP seam: one small interface, one real transport, one mock.

The engine only ever sees ``Transport.send``: it never raises, it answers with what the
receiver said or with an error class, so every failure becomes a recorded attempt.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import aiohttp
from multidict import CIMultiDict

from webhook_service.delivery.ssrf import DestinationBlocked, Guard, GuardedResolver, blocked_reason

USER_AGENT = "webhook-service/0.1"


@dataclass(frozen=True)
class OutboundRequest:
    url: str
    headers: Mapping[str, str]
    body: bytes


@dataclass(frozen=True)
class OutboundResponse:
    status: int | None  # None when no HTTP answer came back
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    # 'timeout', 'connection', 'destination_blocked', 'invalid_url'; None when we got a status
    error: str | None = None
    duration_ms: int = 0


class Transport(Protocol):
    async def send(self, request: OutboundRequest) -> OutboundResponse: ...

    async def close(self) -> None: ...


Handler = Callable[[OutboundRequest], OutboundResponse | Awaitable[OutboundResponse]]


class MockTransport:
    """A transport that asks a plain function, for tests of everything above the wire."""

    def __init__(self, handler: Handler) -> None:
        self._handler = handler

    async def send(self, request: OutboundRequest) -> OutboundResponse:
        result = self._handler(request)
        if inspect.isawaitable(result):
            return await result
        return result

    async def close(self) -> None:
        return None


class AiohttpTransport:
    """One keep-alive session per process; every destination checked by the SSRF guard."""

    def __init__(
        self,
        guard: Guard,
        *,
        total_timeout: float,
        connect_timeout: float,
        body_limit: int,
        connections: int = 200,
    ) -> None:
        self._guard = guard
        self._body_limit = body_limit
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(
                resolver=GuardedResolver(guard), limit=connections, limit_per_host=0
            ),
            timeout=aiohttp.ClientTimeout(total=total_timeout, connect=connect_timeout),
            # Proxies from the environment would route around the guard.
            trust_env=False,
            headers={"User-Agent": USER_AGENT},
        )

    async def send(self, request: OutboundRequest) -> OutboundResponse:
        started = time.perf_counter()

        def elapsed() -> int:
            return int((time.perf_counter() - started) * 1000)

        try:
            # aiohttp skips the resolver for IP literals, so literals are checked here.
            self._guard.check_url(request.url)
            async with self._session.post(
                request.url, data=request.body, headers=request.headers, allow_redirects=False
            ) as response:
                body = await response.content.read(self._body_limit)
                return OutboundResponse(
                    response.status, body, CIMultiDict(response.headers), None, elapsed()
                )
        except DestinationBlocked:
            return OutboundResponse(None, error="destination_blocked", duration_ms=elapsed())
        except TimeoutError:
            return OutboundResponse(None, error="timeout", duration_ms=elapsed())
        except aiohttp.InvalidURL:
            return OutboundResponse(None, error="invalid_url", duration_ms=elapsed())
        except (aiohttp.ClientError, OSError) as exc:
            error = "destination_blocked" if blocked_reason(exc) else "connection"
            return OutboundResponse(None, error=error, duration_ms=elapsed())

    async def close(self) -> None:
        await self._session.close()
