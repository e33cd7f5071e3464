"""Proof that no webhook reaches a place it must not.

Hostile destinations are refused by the real API when an endpoint is created; names that
resolve somewhere public at creation and to loopback (or another blocked address) at send
time are refused by the real delivery engine, while a real receiver listens on loopback and
must see nothing; a redirect to loopback is never followed.

Runs on its own Valkey with no worker, scheduler or exempt network: the shared stack
allows 127.0.0.0/8 for its receivers, and a worker there would race the engine built here
with a guard whose DNS the test controls.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from redis.asyncio import Redis

from tests.integration.conftest import Api, settings_for
from tests.support.api_app import api_app
from tests.support.fake_dns import FakeResolver
from tests.support.logged import wait_logged
from tests.support.stack import Stack, start_stack
from webhook_service.api.context import SERVICES, Services
from webhook_service.config import Settings
from webhook_service.delivery.ssrf import Guard
from webhook_service.delivery.transport import AiohttpTransport
from webhook_service.store.connect import async_client
from webhook_service.wiring import delivery_engine

pytestmark = pytest.mark.integration

PUBLIC = "93.184.215.14"
EVENT_TYPE = "proof.smuggle"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    # No worker: the test sends through an engine of its own; the scheduler's shipper
    # writes the attempts to the log the API reads them from.
    running = start_stack(
        tmp_path_factory.mktemp("ssrf"), {"WEBHOOK_ALLOWED_NETWORKS": ""}, workers=0
    )
    yield running
    running.stop()


@dataclass
class Listener:
    """A real HTTP server that counts every request and answers with a fixed reply."""

    hosts: Sequence[str]
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    seen: list[str] = field(default_factory=list)
    port: int = 0
    _runner: web.AppRunner | None = None

    async def _handle(self, request: web.Request) -> web.Response:
        self.seen.append(f"{request.method} {request.host}{request.path_qs}")
        return web.Response(status=self.status, headers=self.headers)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        for host in self.hosts:
            # Every host on one port, so a URL's port reaches whichever address DNS gives.
            await web.TCPSite(self._runner, host, self.port).start()
            self.port = self.port or self._runner.addresses[0][1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


@dataclass
class Proof:
    api: Api
    services: Services
    settings: Settings
    redis: Redis
    dns: FakeResolver

    def guard(self, *allowed: str) -> Guard:
        return Guard(allowed, resolver=self.dns)

    def allow_at_creation(self, *allowed: str) -> None:
        self.services.guard = self.guard(*allowed)

    async def deliver(self, delivery_ids: list[str], allowed: Sequence[str]) -> None:
        """One pass of the worker's engine, wired as a worker wires it, on our DNS."""
        transport = AiohttpTransport(
            self.guard(*allowed),
            total_timeout=self.settings.request_timeout,
            connect_timeout=self.settings.connect_timeout,
            body_limit=self.settings.response_body_limit,
        )
        try:
            await delivery_engine(self.settings, self.redis, transport).run(delivery_ids)
        finally:
            await transport.close()

    async def create(self, url: str) -> tuple[int, Any]:
        status, body, _ = await self.api.call(
            "POST", "/v1/endpoints", json={"url": url, "event_types": [EVENT_TYPE]}
        )
        if status == 201:
            self.api.created_endpoints.append(body["id"])
        return status, body

    async def send_and_deliver(self, allowed: Sequence[str] = ()) -> dict[str, dict[str, Any]]:
        """One event to every endpoint, one engine pass; each endpoint's first attempt."""
        status, body, _ = await self.api.call(
            "POST", "/v1/events", json={"type": EVENT_TYPE, "data": {"probe": True}}
        )
        assert status == 202, body
        status, event, _ = await self.api.call("GET", f"/v1/events/{body['id']}")
        assert status == 200, event
        deliveries = {d["id"]: d["endpoint_id"] for d in event["deliveries"]}
        await self.deliver(list(deliveries), allowed)
        await wait_logged(self.settings.effective_redis_url)
        attempts: dict[str, dict[str, Any]] = {}
        for delivery_id, endpoint_id in deliveries.items():
            status, record, _ = await self.api.call("GET", f"/v1/deliveries/{delivery_id}")
            assert status == 200, record
            assert len(record["attempt_log"]) == 1, record
            attempts[endpoint_id] = record["attempt_log"][0]
        return attempts


@pytest.fixture
async def proof(stack: Stack) -> AsyncIterator[Proof]:
    settings = settings_for(stack)
    assert settings.allowed_networks == ()
    app = await api_app(settings)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    client = async_client(settings.effective_redis_url)
    async with aiohttp.ClientSession() as session:
        api = Api(session, str(server.make_url("")).rstrip("/"))
        proof = Proof(api, app[SERVICES], settings, client, FakeResolver())
        proof.allow_at_creation()
        yield proof
        for endpoint_id in api.created_endpoints:
            await api.call("DELETE", f"/v1/endpoints/{endpoint_id}")
    await client.aclose()
    await server.close()


@pytest.fixture
async def trap() -> AsyncIterator[Listener]:
    """Listens on IPv4 and IPv6 loopback: where a smuggled request would land."""
    listener = Listener(["127.0.0.1", "::1"])
    await listener.start()
    yield listener
    await listener.stop()


# (url, the reason the API must give). Names under .proof.test resolve through RESOLVED.
HOSTILE: list[tuple[str, str]] = [
    # loopback, in every spelling a resolver or a socket accepts
    ("http://127.0.0.1/", "blocked_address"),
    ("http://127.255.255.254:8080/", "blocked_address"),
    ("http://[::1]/", "blocked_address"),
    ("http://[0:0:0:0:0:0:0:1]/", "blocked_address"),
    ("http://2130706433/", "non_canonical_ip"),
    ("http://0x7f.1/", "non_canonical_ip"),
    ("http://0x7f000001/", "non_canonical_ip"),
    ("http://0177.0.0.1/", "non_canonical_ip"),
    ("http://127.1/", "non_canonical_ip"),
    ("http://127.0.0.1./", "non_canonical_ip"),
    ("http://017700000001/", "non_canonical_ip"),
    ("http://\uff11\uff12\uff17.\uff10.\uff10.\uff11/", "blocked_address"),
    # this network, private, CGNAT, link-local and cloud metadata
    ("http://0.0.0.0/", "blocked_address"),
    ("http://10.0.0.1/", "blocked_address"),
    ("http://172.16.0.1/", "blocked_address"),
    ("http://192.168.1.1/", "blocked_address"),
    ("http://100.64.0.1/", "blocked_address"),
    ("http://100.127.255.254/", "blocked_address"),
    ("http://169.254.169.254/latest/meta-data/", "blocked_address"),
    ("http://[fd00:ec2::254]/latest/meta-data/", "blocked_address"),
    ("http://[fc00::1]/", "blocked_address"),
    ("http://[fe80::1]/", "blocked_address"),
    ("http://[fe80::1%25eth0]/", "non_canonical_ip"),
    # multicast, reserved, broadcast, benchmarking, documentation
    ("http://224.0.0.1/", "blocked_address"),
    ("http://[ff02::1]/", "blocked_address"),
    ("http://240.0.0.1/", "blocked_address"),
    ("http://255.255.255.255/", "blocked_address"),
    ("http://198.18.0.1/", "blocked_address"),
    ("http://192.0.2.1/", "blocked_address"),
    ("http://198.51.100.7/", "blocked_address"),
    ("http://203.0.113.9/", "blocked_address"),
    ("http://[2001:db8::1]/", "blocked_address"),
    ("http://[::]/", "blocked_address"),
    # IPv4 inside IPv6: NAT64, 6to4, Teredo, mapped, compatible
    ("http://[64:ff9b::7f00:1]/", "blocked_address"),
    ("http://[64:ff9b::169.254.169.254]/", "blocked_address"),
    ("http://[64:ff9b:1::a00:1]/", "blocked_address"),
    ("http://[2002:7f00:1::]/", "blocked_address"),
    ("http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", "blocked_address"),
    ("http://[::ffff:127.0.0.1]/", "blocked_address"),
    ("http://[::ffff:7f00:1]/", "blocked_address"),
    ("http://[::ffff:169.254.169.254]/", "blocked_address"),
    ("http://[::127.0.0.1]/", "blocked_address"),
    # credentials, schemes
    ("http://user:password@example.com/", "userinfo"),
    ("https://token@example.com/", "userinfo"),
    ("http://example.com@127.0.0.1/", "userinfo"),
    ("ftp://example.com/", "scheme"),
    ("file:///etc/passwd", "scheme"),
    ("gopher://example.com:70/_x", "scheme"),
    ("ws://example.com/", "scheme"),
    ("javascript:alert(1)", "scheme"),
    # names for this machine or an internal network
    ("http://localhost/", "localhost_name"),
    ("http://localhost./", "localhost_name"),
    ("http://LOCALHOST:8000/", "localhost_name"),
    ("http://foo.localhost/", "localhost_name"),
    ("http://ip6-localhost/", "localhost_name"),
    ("http://localhost.localdomain/", "localhost_name"),
    ("http://metadata.google.internal/computeMetadata/v1/", "localhost_name"),
    # names that resolve to blocked addresses
    ("http://loopback.proof.test/", "blocked_address"),
    ("http://v6-loopback.proof.test/", "blocked_address"),
    ("http://mapped.proof.test/", "blocked_address"),
    ("http://metadata.proof.test/", "blocked_address"),
    ("http://partly-private.proof.test/", "blocked_address"),
]

RESOLVED = {
    "loopback.proof.test": ["127.0.0.1"],
    "v6-loopback.proof.test": ["::1"],
    "mapped.proof.test": ["::ffff:127.0.0.1"],
    "metadata.proof.test": ["169.254.169.254"],
    # Every address must pass: a public one does not launder a private one.
    "partly-private.proof.test": [PUBLIC, "10.0.0.1"],
}


def test_the_table_is_big_enough() -> None:
    assert len(HOSTILE) >= 40
    assert len({url for url, _ in HOSTILE}) == len(HOSTILE)


async def test_every_hostile_destination_is_refused_at_creation(proof: Proof) -> None:
    proof.dns.table.update(RESOLVED)
    got: dict[str, str] = {}
    for url, _ in HOSTILE:
        status, body = await proof.create(url)
        if status != 422:
            got[url] = f"HTTP {status}"
            continue
        assert body["type"].endswith("/destination-blocked"), body
        assert body["detail"].startswith("This URL cannot receive webhooks: "), body
        [error] = body["errors"]
        assert error["pointer"] == "/url"
        got[url] = error["detail"].partition(":")[0]
    assert got == dict(HOSTILE)
    # The same names were accepted while they pointed somewhere public: the DNS is what
    # made the difference above, not the spelling.
    for name in RESOLVED:
        proof.dns.table[name] = [PUBLIC]
        status, body = await proof.create(f"https://{name}/hook")
        assert status == 201, body


async def test_a_blocked_url_is_refused_when_an_endpoint_is_changed(proof: Proof) -> None:
    proof.dns.table["fine.proof.test"] = [PUBLIC]
    status, body = await proof.create("https://fine.proof.test/hook")
    assert status == 201, body
    status, problem, _ = await proof.api.call(
        "PATCH", f"/v1/endpoints/{body['id']}", json={"url": "http://169.254.169.254/"}
    )
    assert status == 422, problem
    status, stored, _ = await proof.api.call("GET", f"/v1/endpoints/{body['id']}")
    assert stored["url"] == "https://fine.proof.test/hook"


# name -> what it resolves to at send time, after resolving to PUBLIC at creation.
REBOUND = {
    "v4-loopback": ["127.0.0.1"],
    "v4-loopback-other": ["127.9.9.9"],
    "v6-loopback": ["::1"],
    "both-loopbacks": ["127.0.0.1", "::1"],
    "mapped-loopback": ["::ffff:127.0.0.1"],
    "compatible-loopback": ["::127.0.0.1"],
    "this-host": ["0.0.0.0"],  # Linux connects 0.0.0.0 to loopback
    "unspecified-v6": ["::"],
    "nat64-loopback": ["64:ff9b::7f00:1"],
    "metadata": ["169.254.169.254"],
    "metadata-v6": ["fd00:ec2::254"],
    "metadata-mapped": ["::ffff:169.254.169.254"],
    "private": ["10.0.0.1"],
    "cgnat": ["100.64.0.1"],
    "link-local-v6": ["fe80::1"],
    "multicast": ["224.0.0.1"],
}


async def test_names_rebound_to_blocked_addresses_are_refused_at_send(
    proof: Proof, trap: Listener
) -> None:
    by_endpoint: dict[str, str] = {}
    for name in REBOUND:
        host = f"{name}.rebind.proof.test"
        proof.dns.table[host] = [PUBLIC]
        status, body = await proof.create(f"http://{host}:{trap.port}/hooks/{name}")
        assert status == 201, body
        by_endpoint[body["id"]] = name
    for name, addresses in REBOUND.items():
        proof.dns.table[f"{name}.rebind.proof.test"] = addresses

    attempts = await proof.send_and_deliver()

    errors = {by_endpoint[e]: (a["status_code"], a["error"]) for e, a in attempts.items()}
    assert errors == dict.fromkeys(REBOUND, (None, "destination_blocked"))
    assert trap.seen == []
    # The engine really asked our DNS at send time, once the names had been rebound.
    asked = {host for host, _, _ in proof.dns.calls}
    assert {f"{name}.rebind.proof.test" for name in REBOUND} <= asked


async def test_literals_allowed_once_are_refused_at_send_after_the_exemption_goes(
    proof: Proof, trap: Listener
) -> None:
    """An operator narrows WEBHOOK_ALLOWED_NETWORKS: stored loopback URLs stop working."""
    proof.allow_at_creation("127.0.0.0/8", "::1/128")
    names = {}
    for name, host in (("v4", "127.0.0.1"), ("v6", "[::1]")):
        status, body = await proof.create(f"http://{host}:{trap.port}/hooks/{name}")
        assert status == 201, body
        names[body["id"]] = name

    attempts = await proof.send_and_deliver()

    errors = {names[e]: (a["status_code"], a["error"]) for e, a in attempts.items()}
    assert errors == {"v4": (None, "destination_blocked"), "v6": (None, "destination_blocked")}
    assert trap.seen == []


@pytest.mark.parametrize("status", [302, 307])
async def test_a_redirect_to_loopback_is_not_followed(proof: Proof, status: int) -> None:
    # The redirector is the one allowed destination; its target sits on another loopback
    # address the guard refuses, reached by literal and by name.
    target = Listener(["127.0.0.2"])
    await target.start()
    proof.dns.table["inside.proof.test"] = ["127.0.0.2"]
    locations = {
        "literal": f"http://127.0.0.2:{target.port}/stolen",
        "named": f"http://inside.proof.test:{target.port}/stolen",
    }
    redirectors = {name: Listener(["127.0.0.1"], status, {"Location": location})
                   for name, location in locations.items()}  # fmt: skip
    for redirector in redirectors.values():
        await redirector.start()
    try:
        proof.allow_at_creation("127.0.0.1/32")
        by_endpoint = {}
        for name, redirector in redirectors.items():
            created, body = await proof.create(f"http://127.0.0.1:{redirector.port}/hook")
            assert created == 201, body
            by_endpoint[body["id"]] = name

        attempts = await proof.send_and_deliver(allowed=["127.0.0.1/32"])

        codes = {by_endpoint[e]: (a["status_code"], a["error"]) for e, a in attempts.items()}
        assert codes == dict.fromkeys(locations, (status, None))
        assert all(len(r.seen) == 1 for r in redirectors.values())
        assert target.seen == []
    finally:
        for redirector in redirectors.values():
            await redirector.stop()
        await target.stop()
