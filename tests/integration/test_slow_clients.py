"""Slow and stalled clients against the real listener: headers and bodies must arrive in
bounded time, and a pile of open connections is refused at a cap, cheaply.

Seen before: headers plus ``Content-Length: 1000000`` and then silence held a connection
for minutes, and 300 of them were all still open after 95 s.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import aiohttp
import pytest

from tests.integration.conftest import Api
from tests.support.api_process import start_api
from tests.support.apikeys import make_key
from tests.support.raw_http import closed_by_peer, read_reply, request_head
from tests.support.stack import Stack

HEADER_TIMEOUT = 1.0
BODY_TIMEOUT = 1.0
MAX_CONNECTIONS = 40
# Well past the timeouts (plus the 2 s linger after an early answer), far below what an
# unbounded server holds (75 s of keep-alive, or forever).
WITHIN = 12.0
STALLED_LENGTH = "200000"  # under the body cap: only the time limit can end it

Address = tuple[str, int]


@pytest.fixture(scope="module")
def timed(stack: Stack) -> Iterator[Address]:
    env = {"WEBHOOK_HEADER_TIMEOUT": str(HEADER_TIMEOUT), "WEBHOOK_BODY_TIMEOUT": str(BODY_TIMEOUT)}
    yield start_api(stack, "api-timed", env)
    stack.kill("api-timed")


@pytest.fixture(scope="module")
def capped(stack: Stack) -> Iterator[Address]:
    yield start_api(stack, "api-capped", {"WEBHOOK_MAX_CONNECTIONS": str(MAX_CONNECTIONS)})
    stack.kill("api-capped")


@pytest.fixture
async def connections() -> AsyncIterator[list[asyncio.StreamWriter]]:
    opened: list[asyncio.StreamWriter] = []
    yield opened
    for writer in opened:
        writer.close()


async def connect(
    address: Address, opened: list[asyncio.StreamWriter]
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection(*address)
    opened.append(writer)
    return reader, writer


async def test_headers_that_never_end_are_cut_off(
    timed: Address, connections: list[asyncio.StreamWriter]
) -> None:
    reader, writer = await connect(timed, connections)
    writer.write(b"POST /v1/events HTTP/1.1\r\nHost: test\r\n")
    assert await closed_by_peer(reader, WITHIN)


async def test_headers_trickled_a_byte_at_a_time_are_cut_off(
    timed: Address, connections: list[asyncio.StreamWriter]
) -> None:
    reader, writer = await connect(timed, connections)

    async def trickle() -> None:
        for byte in b"POST /v1/events HTTP/1.1\r\nX-Slow: " + b"a" * 200:
            writer.write(bytes([byte]))
            await asyncio.sleep(0.1)

    trickling = asyncio.create_task(trickle())
    try:
        assert await closed_by_peer(reader, WITHIN)
    finally:
        trickling.cancel()


async def test_a_body_announced_over_the_cap_is_refused_at_once_and_let_go(
    timed: Address, connections: list[asyncio.StreamWriter]
) -> None:
    # The reported case: headers with Content-Length: 1000000, then silence.
    reader, writer = await connect(timed, connections)
    headers = {"Content-Type": "application/json", "Content-Length": "1000000"}
    writer.write(request_head("POST", "/v1/events", headers))
    reply = await read_reply(reader, WITHIN)
    assert reply.status == 413
    assert await closed_by_peer(reader, WITHIN)


async def test_a_stalled_body_gets_408_and_the_connection_ends(
    timed: Address, connections: list[asyncio.StreamWriter]
) -> None:
    reader, writer = await connect(timed, connections)
    headers = {"Content-Type": "application/json", "Content-Length": STALLED_LENGTH}
    writer.write(request_head("POST", "/v1/events", headers) + b'{"type": "a.b", "data": "')
    reply = await read_reply(reader, WITHIN)
    assert reply.status == 408
    assert reply.headers["content-type"] == "application/problem+json"
    assert reply.headers["connection"] == "close"
    assert await closed_by_peer(reader, WITHIN)


async def test_the_sign_in_form_is_bounded_in_time_too(
    timed: Address, connections: list[asyncio.StreamWriter]
) -> None:
    # Reachable without a key: the easiest place to pile stalled connections up.
    reader, writer = await connect(timed, connections)
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Content-Length": "900"}
    writer.write(request_head("POST", "/dashboard/login", headers, key=None) + b"key=")
    reply = await read_reply(reader, WITHIN)
    assert reply.status == 408


async def test_many_stalled_clients_are_all_let_go(
    timed: Address, connections: list[asyncio.StreamWriter]
) -> None:
    headers = {"Content-Type": "application/json", "Content-Length": STALLED_LENGTH}
    head = request_head("POST", "/v1/events", headers)
    readers = []
    for _ in range(100):
        reader, writer = await connect(timed, connections)
        writer.write(head)
        readers.append(reader)
    closed = await asyncio.gather(*(closed_by_peer(reader, WITHIN) for reader in readers))
    assert all(closed)


async def test_past_the_cap_a_connection_is_answered_503_and_closed(
    capped: Address, connections: list[asyncio.StreamWriter]
) -> None:
    held = [await connect(capped, connections) for _ in range(MAX_CONNECTIONS)]
    # The server has taken them all once an answer on the last one came back.
    last_reader, last_writer = held[-1]
    last_writer.write(request_head("GET", "/healthz", {}, key=None))
    assert (await read_reply(last_reader)).status == 200

    reader, writer = await connect(capped, connections)
    writer.write(request_head("GET", "/healthz", {}, key=None))
    refused = await read_reply(reader)
    assert refused.status == 503
    assert refused.headers["retry-after"] == "1"
    assert refused.headers["content-type"] == "application/problem+json"
    assert await closed_by_peer(reader, WITHIN)

    # One let go: a new connection is served again.
    for _, held_writer in held[:5]:
        held_writer.close()
    await asyncio.sleep(0.5)
    reader, writer = await connect(capped, connections)
    writer.write(request_head("GET", "/healthz", {}, key=None))
    assert (await read_reply(reader)).status == 200


async def test_one_key_holds_at_most_its_share_of_requests_in_flight(
    stack: Stack, connections: list[asyncio.StreamWriter]
) -> None:
    # Two slow bodies of one key take its whole share; a third is refused before its body
    # is read, while another key is served as before.
    address = start_api(stack, "api-share", {"WEBHOOK_KEY_CONCURRENCY": "2"})
    try:
        async with aiohttp.ClientSession() as session:
            api = Api(session, f"http://{address[0]}:{address[1]}")
            slow_key = (await make_key(api, ["events:write"]))["key"]
            other_key = (await make_key(api, ["events:write"]))["key"]
            headers = {"Content-Type": "application/json", "Content-Length": "100"}
            for _ in range(2):
                _, writer = await connect(address, connections)
                writer.write(request_head("POST", "/v1/events", headers, key=slow_key) + b"{")
            await asyncio.sleep(0.5)  # both are being read by now
            status, problem, retry = await _post_event(api, slow_key)
            assert (status, problem, retry) == (429, "too-many-concurrent-requests", "1")
            assert (await _post_event(api, other_key))[0] == 202
            for writer in connections:
                writer.close()
            await asyncio.sleep(0.5)
            assert (await _post_event(api, slow_key))[0] == 202
    finally:
        stack.kill("api-share")


async def _post_event(api: Api, key: str) -> tuple[int, str, str | None]:
    status, body, headers = await api.call(
        "POST", "/v1/events", json={"type": "share.test", "data": {}}, key=key
    )
    kind = body["type"].rsplit("/", 1)[1] if status >= 400 else ""
    return status, kind, headers.get("Retry-After")
