"""The HTTP edge: AiohttpTransport against aioresponses, and MockTransport.

No socket is opened: aioresponses replaces ``ClientSession._request``, and the SSRF guard's
literal check runs before the session is asked for anything.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp.client_reqrep import ConnectionKey
from aioresponses import aioresponses
from yarl import URL

from tests.support.mock_http import CompatResponse
from webhook_service.delivery.ssrf import DestinationBlocked, Guard
from webhook_service.delivery.transport import (
    AiohttpTransport,
    MockTransport,
    OutboundRequest,
    OutboundResponse,
)

URL_OK = "https://receiver.example.com/hook"
BODY = b'{"type":"invoice.paid"}'


def reply(http: aioresponses, url: str = URL_OK, **kwargs: Any) -> None:
    http.post(url, response_class=CompatResponse, **kwargs)


def calls(http: aioresponses) -> list[tuple[str, URL]]:
    return [key for key, made in http.requests.items() for _ in made]


async def _transport(guard: Guard | None = None, body_limit: int = 4096) -> AiohttpTransport:
    return AiohttpTransport(
        guard or Guard(), total_timeout=5.0, connect_timeout=1.0, body_limit=body_limit
    )


@pytest.fixture
async def transport() -> AsyncIterator[AiohttpTransport]:
    # Built inside the running loop: the transport creates its aiohttp session at once.
    made = await _transport()
    yield made
    await made.close()


def request(url: str = URL_OK) -> OutboundRequest:
    return OutboundRequest(url, {"webhook-id": "msg_1", "Content-Type": "application/json"}, BODY)


# -- answers ----------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [200, 201, 204, 299])
async def test_2xx_returns_status_and_body(
    transport: AiohttpTransport, http: aioresponses, status: int
) -> None:
    reply(http, status=status, body=b"thanks")
    response = await transport.send(request())
    assert response.status == status
    assert response.body == b"thanks"
    assert response.error is None
    assert response.duration_ms >= 0


async def test_the_request_carries_body_and_headers(
    transport: AiohttpTransport, http: aioresponses
) -> None:
    reply(http, status=200)
    await transport.send(request())
    [made] = http.requests[("POST", URL(URL_OK))]
    assert made.kwargs["data"] == BODY
    assert made.kwargs["headers"]["webhook-id"] == "msg_1"
    assert made.kwargs["headers"]["Content-Type"] == "application/json"
    assert made.kwargs["allow_redirects"] is False


@pytest.mark.parametrize("status", [400, 410, 500, 503])
async def test_error_statuses_are_answers_not_errors(
    transport: AiohttpTransport, http: aioresponses, status: int
) -> None:
    reply(http, status=status, body=b"nope", headers={"Retry-After": "30"})
    response = await transport.send(request())
    assert (response.status, response.body, response.error) == (status, b"nope", None)
    assert response.headers["Retry-After"] == "30"


@pytest.mark.parametrize("limit", [0, 1, 10, 99])
async def test_the_body_is_truncated_to_the_limit(http: aioresponses, limit: int) -> None:
    transport = await _transport(body_limit=limit)
    try:
        reply(http, status=500, body=b"x" * 100)
        response = await transport.send(request())
    finally:
        await transport.close()
    assert response.status == 500
    assert response.body == b"x" * limit


async def test_a_body_shorter_than_the_limit_is_kept_whole(http: aioresponses) -> None:
    transport = await _transport(body_limit=1000)
    try:
        reply(http, status=200, body=b"short")
        assert (await transport.send(request())).body == b"short"
    finally:
        await transport.close()


async def test_a_redirect_is_returned_not_followed(
    transport: AiohttpTransport, http: aioresponses
) -> None:
    target = "http://169.254.169.254/latest/meta-data/"
    reply(http, status=302, headers={"Location": target})
    reply(http, target, status=200, body=b"secret credentials")
    response = await transport.send(request())
    assert response.status == 302
    assert response.headers["Location"] == target
    assert response.error is None
    assert calls(http) == [("POST", URL(URL_OK))]


# -- failures ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "exc",
    [
        aiohttp.ClientConnectionError("refused"),
        aiohttp.ServerDisconnectedError(),
        ConnectionResetError("reset"),
        aiohttp.ClientPayloadError("truncated"),
    ],
)
async def test_connection_failures_become_error_connection(
    transport: AiohttpTransport, http: aioresponses, exc: Exception
) -> None:
    reply(http, exception=exc)
    response = await transport.send(request())
    assert response == OutboundResponse(None, error="connection", duration_ms=response.duration_ms)


@pytest.mark.parametrize(
    "exc",
    [
        TimeoutError(),  # asyncio.TimeoutError is this same class since Python 3.11
        aiohttp.ServerTimeoutError("read"),
        aiohttp.ConnectionTimeoutError("connect"),
        aiohttp.SocketTimeoutError("socket read"),
    ],
)
async def test_timeouts_become_error_timeout(
    transport: AiohttpTransport, http: aioresponses, exc: Exception
) -> None:
    reply(http, exception=exc)
    response = await transport.send(request())
    assert response.status is None
    assert response.error == "timeout"
    assert response.body == b""


async def test_a_blocked_reason_behind_a_client_error_is_destination_blocked(
    transport: AiohttpTransport, http: aioresponses
) -> None:
    # What the GuardedResolver's refusal looks like once aiohttp has wrapped it.
    blocked = DestinationBlocked("blocked_address", "10.0.0.1 is a private address")
    wrapped = aiohttp.ClientConnectorDNSError(
        ConnectionKey("internal.example.com", 443, True, True, None, None, None),
        blocked,
    )
    reply(http, exception=wrapped)
    response = await transport.send(request())
    assert response.error == "destination_blocked"
    assert response.status is None


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://127.0.0.1:8080/hook",
        "http://10.1.2.3/",
        "http://[::1]/",
        "http://169.254.169.254/latest/meta-data/",
        "http://localhost/",
    ],
)
async def test_blocked_literals_are_refused_without_a_request(
    transport: AiohttpTransport, http: aioresponses, url: str
) -> None:
    reply(http, url, status=200)
    response = await transport.send(request(url))
    assert response.status is None
    assert response.error == "destination_blocked"
    assert calls(http) == []


@pytest.mark.parametrize("url", ["ftp://receiver.example.com/", "https://user:pw@example.com/"])
async def test_urls_the_guard_refuses_make_no_request(
    transport: AiohttpTransport, http: aioresponses, url: str
) -> None:
    response = await transport.send(request(url))
    assert response.error == "destination_blocked"
    assert calls(http) == []


async def test_an_allow_listed_literal_goes_through(http: aioresponses) -> None:
    transport = await _transport(Guard(["127.0.0.0/8"]))
    try:
        reply(http, "http://127.0.0.1:8080/hook", status=204)
        response = await transport.send(request("http://127.0.0.1:8080/hook"))
    finally:
        await transport.close()
    assert response.status == 204
    assert response.error is None
    assert calls(http) == [("POST", URL("http://127.0.0.1:8080/hook"))]


async def test_the_allow_list_does_not_open_other_ranges(http: aioresponses) -> None:
    transport = await _transport(Guard(["127.0.0.0/8"]))
    try:
        response = await transport.send(request("http://10.0.0.1/"))
    finally:
        await transport.close()
    assert response.error == "destination_blocked"
    assert calls(http) == []


# -- MockTransport ----------------------------------------------------------------------------


async def test_mock_transport_with_a_sync_handler() -> None:
    seen: list[OutboundRequest] = []

    def handler(req: OutboundRequest) -> OutboundResponse:
        seen.append(req)
        return OutboundResponse(201, b"sync")

    mock = MockTransport(handler)
    response = await mock.send(request())
    assert response == OutboundResponse(201, b"sync")
    assert seen == [request()]
    await mock.close()


async def test_mock_transport_with_an_async_handler() -> None:
    seen: list[str] = []

    async def handler(req: OutboundRequest) -> OutboundResponse:
        await asyncio.sleep(0)
        seen.append(req.url)
        return OutboundResponse(None, error="timeout")

    mock = MockTransport(handler)
    response = await mock.send(request("https://other.example.com/"))
    assert response.error == "timeout"
    assert response.status is None
    assert seen == ["https://other.example.com/"]
    await mock.close()
