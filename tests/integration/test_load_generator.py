"""The bench's load generator against a real loopback aiohttp server: every request is
sent, answered or counted as an error, whatever the server says."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from bench.http_load import build_request, closed_loop, open_loop


@pytest.fixture
async def server() -> AsyncIterator[tuple[int, list[bytes]]]:
    seen: list[bytes] = []

    async def handle(request: web.Request) -> web.Response:
        body = await request.read()
        seen.append(body)
        # Every third request fails, so errors are counted apart from answers.
        status = 500 if len(seen) % 3 == 0 else 202
        return web.json_response({"n": len(seen)}, status=status)

    app = web.Application()
    app.router.add_post("/v1/events", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield runner.addresses[0][1], seen
    await runner.cleanup()


async def test_open_loop_sends_every_scheduled_request(server: tuple[int, list[bytes]]) -> None:
    port, seen = server
    replies: dict[int, int] = {}
    result = await open_loop(
        port,
        lambda i: build_request("POST", "/v1/events", port, str(i).encode()),
        rate=200,
        duration=0.5,
        on_reply=lambda index, status, _body, _at: replies.__setitem__(index, status),
    )
    assert result.sent == 100
    assert sorted(int(b) for b in seen) == list(range(100))
    assert result.completed == 100
    assert sorted(replies) == list(range(100))
    assert result.statuses == {202: 67, 500: 33}
    assert result.errors == 33


async def test_closed_loop_stops_at_its_count(server: tuple[int, list[bytes]]) -> None:
    port, seen = server
    request = build_request("POST", "/v1/events", port, b"{}")
    result = await closed_loop(port, lambda _i: request, connections=4, count=30)
    assert (result.sent, result.completed, len(seen)) == (30, 30, 30)
    assert result.errors == 10


async def test_a_server_that_is_not_there_is_all_errors() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    request = build_request("POST", "/v1/events", port, b"{}")
    result = await open_loop(port, lambda _i: request, rate=100, duration=0.2, drain_timeout=2)
    assert result.sent == 20
    assert result.completed == 0
    assert result.errors == 20
