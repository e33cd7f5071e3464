"""AiohttpTransport through an egress proxy (WEBHOOK_EGRESS_PROXY), against a fake proxy.

The fake proxy is a raw asyncio server on loopback that records each request it gets and
answers a canned reply itself, so no receiver is needed: what matters is what reached the
proxy (the request line, Proxy-Authorization) and what did not (a refused send opens no
connection to it). Receivers' names resolve through a FakeResolver; the real proxy is in
tests/integration/test_egress_proxy.py.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from pydantic import ValidationError

from tests.support.fake_dns import FakeResolver
from tests.support.stack import settings_of
from webhook_service.delivery.ssrf import Guard
from webhook_service.delivery.transport import (
    AiohttpTransport,
    EgressProxy,
    OutboundRequest,
)
from webhook_service.wiring import aiohttp_transport

PUBLIC = "93.184.215.14"  # a public address: the guard lets it through
PASSWORD = "pr0xy-s3cret"
BODY = b'{"type":"invoice.paid"}'


@dataclass
class Seen:
    line: str
    headers: dict[str, str]
    body: bytes


@dataclass
class FakeProxy:
    """Answers every request with ``reply``; ``seen`` is what came in, ``connections`` how
    many connections were opened to it at all."""

    reply: bytes = b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\nVia: 1.1 fake\r\n\r\nvia proxy"
    seen: list[Seen] = field(default_factory=list)
    connections: int = 0
    port: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            line, *rest = head.split("\r\n")
            headers = {}
            for text in rest:
                if text:
                    name, _, value = text.partition(":")
                    headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length", "0"))
            body = await reader.readexactly(length) if length else b""
            self.seen.append(Seen(line, headers, body))
            writer.write(self.reply)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.fixture
async def proxy() -> AsyncIterator[FakeProxy]:
    fake = FakeProxy()
    server = await asyncio.start_server(fake.handle, "127.0.0.1", 0)
    fake.port = server.sockets[0].getsockname()[1]
    yield fake
    server.close()
    await server.wait_closed()


DNS = {
    "receiver.example.com": [PUBLIC],
    # One good address and one private: the proxy may pick either, so it is refused.
    "mixed.example.com": [PUBLIC, "10.0.0.1"],
    "internal.example.com": ["10.0.0.1"],
    "metadata.example.com": ["169.254.169.254"],
    "loopback.example.com": ["127.0.0.1"],
}


def made(
    proxy: FakeProxy, *, credentials: bool = True, allowed: tuple[str, ...] = ()
) -> AiohttpTransport:
    userinfo = f"alice:{PASSWORD}@" if credentials else ""
    return AiohttpTransport(
        Guard(allowed, resolver=FakeResolver(DNS)),
        total_timeout=5.0,
        connect_timeout=1.0,
        body_limit=4096,
        proxy=EgressProxy.parse(f"http://{userinfo}127.0.0.1:{proxy.port}"),
    )


def request(url: str) -> OutboundRequest:
    return OutboundRequest(url, {"webhook-id": "msg_1", "Content-Type": "application/json"}, BODY)


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


# -- sends that go through ----------------------------------------------------------------------


async def test_http_goes_to_the_proxy_as_an_absolute_request_with_proxy_authorization(
    proxy: FakeProxy,
) -> None:
    transport = made(proxy)
    try:
        response = await transport.send(request("http://receiver.example.com:8080/hook?a=1"))
    finally:
        await transport.close()
    assert (response.status, response.body, response.error) == (200, b"via proxy", None)
    assert response.headers["Via"] == "1.1 fake"
    [seen] = proxy.seen
    # The proxy is asked for the receiver's URL by name: it resolves and connects itself.
    assert seen.line == "POST http://receiver.example.com:8080/hook?a=1 HTTP/1.1"
    assert seen.headers["host"] == "receiver.example.com:8080"
    assert seen.headers["proxy-authorization"] == basic("alice", PASSWORD)
    assert seen.headers["webhook-id"] == "msg_1"
    assert seen.body == BODY


async def test_https_asks_the_proxy_for_a_connect_tunnel(proxy: FakeProxy) -> None:
    # The fake proxy answers the CONNECT with 200 and then its canned HTTP reply, which is
    # no TLS handshake: the tunnel was asked for, and the send fails as a network error.
    transport = made(proxy)
    try:
        response = await transport.send(request("https://receiver.example.com/hook"))
    finally:
        await transport.close()
    [seen] = proxy.seen
    assert seen.line == "CONNECT receiver.example.com:443 HTTP/1.1"
    # On a CONNECT the credentials go in the tunnel request, never through the tunnel.
    assert seen.headers["proxy-authorization"] == basic("alice", PASSWORD)
    assert "webhook-id" not in seen.headers and seen.body == b""
    assert (response.status, response.error) == (None, "connection")


async def test_without_credentials_no_proxy_authorization_is_sent(proxy: FakeProxy) -> None:
    transport = made(proxy, credentials=False)
    try:
        response = await transport.send(request("http://receiver.example.com/hook"))
    finally:
        await transport.close()
    assert response.status == 200
    assert "proxy-authorization" not in proxy.seen[0].headers


async def test_the_proxy_on_a_private_address_is_not_refused_by_the_guard(
    proxy: FakeProxy,
) -> None:
    # The proxy is on 127.0.0.1 and the guard allows no network: the proxy is the
    # operator's choice, only receivers are guarded.
    transport = made(proxy)
    try:
        assert (await transport.send(request("http://receiver.example.com/"))).status == 200
    finally:
        await transport.close()


async def test_a_name_in_the_allowed_networks_goes_through(proxy: FakeProxy) -> None:
    transport = made(proxy, allowed=("127.0.0.0/8",))
    try:
        response = await transport.send(request("http://loopback.example.com:9000/hook"))
    finally:
        await transport.close()
    assert response.status == 200
    assert proxy.seen[0].line == "POST http://loopback.example.com:9000/hook HTTP/1.1"


# -- sends refused before the proxy sees anything -------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://internal.example.com/hook",
        "http://mixed.example.com/hook",  # every address must pass, not just one
        "https://metadata.example.com/latest/meta-data/",
        "http://10.0.0.1/hook",
        "http://[::1]/hook",
        "http://169.254.169.254/",
        "http://localhost/hook",
        "http://2130706433/",
    ],
)
async def test_a_blocked_destination_is_refused_without_a_request_to_the_proxy(
    proxy: FakeProxy, url: str
) -> None:
    transport = made(proxy)
    try:
        response = await transport.send(request(url))
    finally:
        await transport.close()
    assert (response.status, response.error) == (None, "destination_blocked")
    assert proxy.connections == 0


async def test_a_name_that_does_not_resolve_is_a_network_error_not_sent(
    proxy: FakeProxy,
) -> None:
    # As on a direct send: a failed lookup may be DNS trouble of the moment, so retried.
    transport = made(proxy)
    try:
        response = await transport.send(request("http://nowhere.example.com/hook"))
    finally:
        await transport.close()
    assert (response.status, response.error) == (None, "connection")
    assert proxy.connections == 0


# -- the proxy failing ---------------------------------------------------------------------------


async def test_a_refused_connect_is_a_network_error(proxy: FakeProxy) -> None:
    # The proxy's own deny list or a wrong password: nothing reached the receiver.
    proxy.reply = b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n"
    transport = made(proxy)
    try:
        response = await transport.send(request("https://receiver.example.com/hook"))
    finally:
        await transport.close()
    assert (response.status, response.error) == (None, "connection")


async def test_a_proxy_that_is_down_is_a_network_error() -> None:
    # A port nothing listens on: bound and closed at once.
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    transport = AiohttpTransport(
        Guard(resolver=FakeResolver(DNS)),
        total_timeout=5.0,
        connect_timeout=1.0,
        body_limit=4096,
        proxy=EgressProxy.parse(f"http://127.0.0.1:{port}"),
    )
    try:
        response = await transport.send(request("http://receiver.example.com/hook"))
    finally:
        await transport.close()
    assert (response.status, response.error) == (None, "connection")


# -- the setting ----------------------------------------------------------------------------------


def test_credentials_are_split_from_the_url_and_kept_out_of_repr() -> None:
    proxy = EgressProxy.parse("http://al%40ice:p%3Ass%2Fw@proxy.example.net:3128/")
    assert str(proxy.url) == "http://proxy.example.net:3128"
    assert proxy.authorization == basic("al@ice", "p:ss/w")
    assert proxy.authorization not in repr(proxy)
    assert "p:ss/w" not in repr(proxy) and "p%3Ass" not in repr(proxy)
    assert EgressProxy.parse("http://proxy:3128").authorization is None


@pytest.mark.parametrize(
    "url",
    [
        f"https://alice:{PASSWORD}@proxy:3128",
        f"socks5://alice:{PASSWORD}@proxy:1080",
        f"http://alice:{PASSWORD}@proxy:3128/path",
        f"http://alice:{PASSWORD}@proxy:3128?q=1",
        f"http://alice:{PASSWORD}@:3128",
        f"http://alice:{PASSWORD}@proxy:99999",
        f"http://al%3Aice:{PASSWORD}@proxy:3128",
    ],
)
def test_a_bad_proxy_url_is_refused_at_start_up_without_quoting_it(url: str) -> None:
    with pytest.raises(ValueError) as parsed:
        EgressProxy.parse(url)
    assert PASSWORD not in str(parsed.value)
    with pytest.raises(ValidationError) as refused:
        settings_of({"WEBHOOK_EGRESS_PROXY": url})
    assert "WEBHOOK_EGRESS_PROXY" in str(refused.value)
    assert PASSWORD not in str(refused.value)


def test_the_setting_is_a_secret() -> None:
    settings = settings_of({"WEBHOOK_EGRESS_PROXY": f"http://alice:{PASSWORD}@proxy:3128"})
    assert settings.egress_proxy is not None
    assert PASSWORD not in repr(settings) and PASSWORD not in str(settings)
    assert settings_of({"WEBHOOK_EGRESS_PROXY": ""}).egress_proxy is None
    assert settings_of({}).egress_proxy is None


async def test_the_wired_transport_sends_through_the_configured_proxy(proxy: FakeProxy) -> None:
    settings = settings_of(
        {
            "WEBHOOK_EGRESS_PROXY": f"http://alice:{PASSWORD}@127.0.0.1:{proxy.port}",
            # A literal receiver, so no DNS is needed: the wiring's guard has no fake one.
            "WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8",
        }
    )
    transport = aiohttp_transport(settings)
    try:
        response = await transport.send(request("http://127.0.0.1:9/hook"))
    finally:
        await transport.close()
    assert response.status == 200
    [seen] = proxy.seen
    assert seen.line == "POST http://127.0.0.1:9/hook HTTP/1.1"
    assert seen.headers["proxy-authorization"] == basic("alice", PASSWORD)
