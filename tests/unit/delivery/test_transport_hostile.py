"""AiohttpTransport against hostile receivers on real loopback sockets: one deadline over
the whole attempt, bounded headers, and no more of the body read than is kept."""

from __future__ import annotations

import asyncio
import time
import tracemalloc
from collections.abc import AsyncIterator

import pytest

from tests.support.hostile_receivers import (
    FLOOD_HEADER_BYTES,
    FLOOD_HEADERS,
    FLOOD_OTHER_HEADERS,
    HostileReceiver,
    Kind,
    in_child,
)
from webhook_service.delivery.ssrf import Guard
from webhook_service.delivery.transport import (
    MAX_RESPONSE_HEADER_LINE,
    MAX_RESPONSE_HEADERS,
    AiohttpTransport,
    OutboundRequest,
    OutboundResponse,
)

TOTAL = 1.0
CONNECT = 0.5
LIMIT = 4096
# Larger than the never-read socket's buffer and the sender's together: its write blocks.
LARGE_BODY = b"x" * 256 * 1024
# What one attempt may hold of an answer: the header bounds twice over (raw and decoded).
PER_ATTEMPT = 2 * MAX_RESPONSE_HEADERS * MAX_RESPONSE_HEADER_LINE


def _transport(
    total: float = TOTAL, connect: float = CONNECT, limit: int = LIMIT
) -> AiohttpTransport:
    return AiohttpTransport(
        Guard(["127.0.0.0/8"]), total_timeout=total, connect_timeout=connect, body_limit=limit
    )


@pytest.fixture
async def transport() -> AsyncIterator[AiohttpTransport]:
    made = _transport()
    yield made
    await made.close()


async def _send(
    transport: AiohttpTransport, url: str, body: bytes = b"{}"
) -> tuple[OutboundResponse, float]:
    started = time.monotonic()
    response = await transport.send(OutboundRequest(url, {"webhook-id": "msg_1"}, body))
    return response, time.monotonic() - started


async def _hung_up(receiver: HostileReceiver, within: float) -> bool:
    deadline = time.monotonic() + within
    while not receiver.hung_up() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return len(receiver.hung_up()) == len(receiver.connections) == 1


@pytest.mark.parametrize(
    ("kind", "body", "error"),
    [
        # A byte every 0.2 s: no timeout per read would ever fire.
        (Kind.DRIP_BODY, b"{}", "timeout"),
        (Kind.HEADERS_THEN_STALL, b"{}", "timeout"),
        (Kind.TLS_STALL, b"{}", "timeout"),
        (Kind.NEVER_READS, LARGE_BODY, "timeout"),
        (Kind.HEADER_FLOOD, b"{}", "invalid_response"),
    ],
)
async def test_a_hostile_answer_is_an_error_within_the_deadline(
    transport: AiohttpTransport, kind: Kind, body: bytes, error: str
) -> None:
    async with HostileReceiver(kind, drip_every=0.2) as receiver:
        response, took = await _send(transport, receiver.url(), body)
        assert (response.status, response.error, response.body) == (None, error, b"")
        assert took <= 2 * TOTAL
        assert response.duration_ms <= 2 * TOTAL * 1000
        if kind is not Kind.NEVER_READS:
            # The sender hung up, rather than leaving the socket to the receiver.
            assert await _hung_up(receiver, 2 * TOTAL)


async def test_the_tls_deadline_is_the_handshake_not_the_tcp_connect(
    transport: AiohttpTransport,
) -> None:
    async with HostileReceiver(Kind.TLS_STALL) as receiver:
        response, _ = await _send(transport, receiver.url())
        [connection] = receiver.connections
    assert response.error == "timeout"
    assert connection.request[:1] == b"\x16"  # a ClientHello came, and no answer to it


async def test_the_deadline_also_cuts_a_longer_connect_timeout_short() -> None:
    transport = _transport(total=0.5, connect=10.0)
    try:
        async with HostileReceiver(Kind.TLS_STALL) as receiver:
            response, took = await _send(transport, receiver.url())
    finally:
        await transport.close()
    assert response.error == "timeout"
    assert took < 5.0  # half the connect timeout: the total deadline ended it


async def test_an_endless_body_is_read_to_the_limit_and_no_further(
    transport: AiohttpTransport,
) -> None:
    async with HostileReceiver(Kind.ENDLESS_BODY) as receiver:
        response, _ = await _send(transport, receiver.url())
        # An answer, not a timeout: the rest of the body was never waited for.
        assert (response.status, response.error, response.body) == (200, None, b"x" * LIMIT)
        assert await _hung_up(receiver, 2 * TOTAL)


async def test_a_body_in_pieces_is_kept_whole_up_to_the_limit() -> None:
    transport = _transport(limit=20)
    try:
        async with HostileReceiver(Kind.DRIP_BODY, status=500, drip_every=0.01) as receiver:
            response, _ = await _send(transport, receiver.url())
    finally:
        await transport.close()
    assert (response.status, response.error, response.body) == (500, None, b"x" * 20)


@pytest.mark.parametrize(
    ("headers", "size", "status", "error"),
    [
        (MAX_RESPONSE_HEADERS - FLOOD_OTHER_HEADERS, 100, 200, None),  # exactly the most
        (MAX_RESPONSE_HEADERS - FLOOD_OTHER_HEADERS + 1, 100, None, "invalid_response"),
        (1, 8000, 200, None),
        (1, 1_000_000, None, "invalid_response"),
        (FLOOD_HEADERS, FLOOD_HEADER_BYTES, None, "invalid_response"),  # 1 MB, aiohttp takes it
    ],
)
async def test_answer_headers_are_bounded(
    transport: AiohttpTransport, headers: int, size: int, status: int | None, error: str | None
) -> None:
    async with HostileReceiver(
        Kind.HEADER_FLOOD, flood_headers=headers, flood_header_bytes=size
    ) as receiver:
        response, _ = await _send(transport, receiver.url())
    assert (response.status, response.error) == (status, error)


@pytest.mark.parametrize("kind", [Kind.HEADER_FLOOD, Kind.ENDLESS_BODY, Kind.DRIP_BODY])
async def test_memory_per_attempt_is_bounded(transport: AiohttpTransport, kind: Kind) -> None:
    # The receiver in a process of its own, so that only the sender's memory is traced.
    at_once = 10
    with in_child(kind) as url:
        await _send(transport, url)  # the session's own first allocations are not counted
        tracemalloc.start()
        try:
            await asyncio.gather(*(_send(transport, url) for _ in range(at_once)))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    print(f"\n{kind}: {peak / at_once / 1024:.0f} KiB an attempt at peak, {at_once} at once")
    assert peak / at_once <= PER_ATTEMPT
