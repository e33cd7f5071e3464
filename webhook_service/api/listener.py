"""Serving the API on a socket, with the connection-level bounds aiohttp leaves to us.

- Headers: aiohttp closes a connection that has not sent a whole request (line and headers)
  within its keep-alive timeout, from the connection's start or the last answer; bytes
  trickled in do not extend it. So ``WEBHOOK_HEADER_TIMEOUT`` is that timeout, which also
  ends idle keep-alive connections.
- Bodies: read by the handlers, under ``WEBHOOK_BODY_TIMEOUT`` (api/body.py).
- Connections: past ``WEBHOOK_MAX_CONNECTIONS`` open at once in this process, a new one is
  answered a canned 503 and closed before any of it is parsed, so a pile of stalled clients
  costs a file descriptor each, not a handler and its buffers.
- Stopping (SIGTERM, SIGINT): no new connections, and every request already begun is served
  to its end, for up to ``WEBHOOK_SHUTDOWN_TIMEOUT`` (see ``Drain``).
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable
from typing import Any, cast

import orjson
from aiohttp import web
from yarl import URL

from webhook_service import event_loop
from webhook_service.api.problems import CONTENT_TYPE, PROBLEM_TYPE_BASE, Handler
from webhook_service.config import Settings

log = logging.getLogger(__name__)

# After an answer given before the body was read whole (413, 408), how long the rest is
# read and dropped so the client sees the answer rather than a reset: short, because a
# client that stalls gains this much again.
LINGER_S = 2.0
# aiohttp's own shutdown runs once the drain is over: what is still in flight then has
# outlasted WEBHOOK_SHUTDOWN_TIMEOUT, and is cancelled within this.
_CUT_OFF_S = 1.0

_REFUSAL_BODY = orjson.dumps(
    {
        "type": PROBLEM_TYPE_BASE + "too-many-connections",
        "title": "Service unavailable",
        "status": 503,
        "detail": "This server has as many connections open as it serves; retry shortly.",
    }
)
REFUSAL = (
    b"HTTP/1.1 503 Service Unavailable\r\n"
    b"Content-Type: " + CONTENT_TYPE.encode() + b"\r\n"
    b"Content-Length: " + str(len(_REFUSAL_BODY)).encode() + b"\r\n"
    b"Retry-After: 1\r\nConnection: close\r\n\r\n" + _REFUSAL_BODY
)


class _Refusal(asyncio.Protocol):
    """A connection over the cap: answered at once, then half-closed. What the client sends
    meanwhile is read and dropped until it closes its side too, or for LINGER_S at most: a
    socket closed with unread bytes in it sends a reset, and the client may lose the answer
    with it (uvloop closes at once, so the request often arrived just after)."""

    _closing: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A cast, not an isinstance check: uvloop's TCP transport is none of asyncio's
        # transport classes (the check failed, and every connection over the cap was
        # dropped unanswered).
        tcp = cast(asyncio.Transport, transport)
        tcp.write(REFUSAL)
        tcp.write_eof()
        self._closing = asyncio.get_running_loop().call_later(LINGER_S, tcp.close)

    def data_received(self, data: bytes) -> None:
        pass  # the request is refused unread

    def eof_received(self) -> bool:
        return False  # both sides done: the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        if self._closing is not None:
            self._closing.cancel()


class CappedSite(web.BaseSite):
    """A TCP site that refuses connections beyond ``max_connections`` open at once."""

    def __init__(self, runner: web.BaseRunner, host: str, port: int, max_connections: int):
        super().__init__(runner)
        self._host = host
        self._port = port
        self._max_connections = max_connections

    @property
    def name(self) -> str:
        return str(URL.build(scheme="http", host=self._host, port=self._port))

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None  # the runner is set up before a site is made

        def protocol() -> asyncio.BaseProtocol:
            if len(server.connections) >= self._max_connections:
                return _Refusal()
            return server()

        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            protocol, self._host, self._port, backlog=self._backlog
        )


class Drain:
    """The requests this process is serving, so that a stop lets every one of them finish.

    aiohttp's graceful shutdown waits for the handlers in progress, but from its first step
    it drops whatever else arrives on every connection (aio-libs/aiohttp#2298): a request
    whose body was still arriving then waited for the rest until the body timeout, and got
    a 408 (its producer an error) 20 s later. So the stop closes the listening socket first
    and waits here for the requests begun to end, each answer saying ``Connection: close``;
    aiohttp's shutdown comes after, when only idle connections are left.
    """

    def __init__(self) -> None:
        self._serving = 0
        self._stopping = False
        self._idle = asyncio.Event()
        self._idle.set()

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        self._serving += 1
        self._idle.clear()
        try:
            response = await handler(request)
        finally:
            self._serving -= 1
            if not self._serving:
                self._idle.set()
        if self._stopping:
            # A keep-alive client sends its next request to a process that is staying.
            response.force_close()
        return response

    async def wait(self, grace: float) -> None:
        """Until no request is being served, for at most ``grace`` seconds."""
        self._stopping = True
        await asyncio.sleep(0)  # requests whose head has just arrived get to begin
        try:
            async with asyncio.timeout(grace):
                await self._idle.wait()
        except TimeoutError:
            log.warning("%d requests still in flight after %.0f s; cut off", self._serving, grace)


def runner_options(settings: Settings) -> dict[str, Any]:
    """What the request handler of every connection is given: for the listener here and for
    the tests that serve the app in-process, so both run what production runs."""
    return {
        "keepalive_timeout": settings.header_timeout,
        "lingering_time": LINGER_S,
        "handler_cancellation": True,
    }


def serve(app: Awaitable[web.Application], settings: Settings) -> None:
    """Serve until SIGTERM or SIGINT, then drain the requests in flight."""
    event_loop.run(_serve(app, settings), settings)


async def _serve(app: Awaitable[web.Application], settings: Settings) -> None:
    access_log = logging.getLogger("aiohttp.access") if settings.access_log else None
    served = await app
    drain = Drain()
    # Outermost: it sees every request begun, and the answer the others made of it.
    served.middlewares.insert(0, drain.middleware)
    runner = web.AppRunner(
        served, access_log=access_log, shutdown_timeout=_CUT_OFF_S, **runner_options(settings)
    )
    await runner.setup()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        site = CappedSite(runner, settings.host, settings.port, settings.max_connections)
        await site.start()
        log.info("API listening on http://%s:%s", settings.host, settings.port)
        await stop.wait()
        log.info("stopping: no new connections; serving the requests in flight")
        await site.stop()
        await drain.wait(settings.shutdown_timeout)
    finally:
        await runner.cleanup()
