"""Deliveries through a real egress proxy (WEBHOOK_EGRESS_PROXY): Debian's tinyproxy.

The module's own stack (Valkey, a worker, the scheduler) sends every delivery through a
tinyproxy on loopback that demands Basic credentials; the receivers verify signatures.
Shown: a plain-http delivery goes through it (its log names the request, the receiver sees
its Via header and never the credentials), an https one through a CONNECT tunnel to a
receiver with a certificate of the test's own CA; an address the workers' guard denies is
refused without the proxy seeing a request; with the proxy down, attempts fail as network
errors and the delivery arrives once it is back; the password is in no log.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.integration.conftest import (
    Api,
    create_endpoint,
    delivery_statuses,
    send_event,
    serve_api,
    wait_for,
)
from tests.support.receiver import Receiver
from tests.support.stack import Stack, settings_of, start_stack
from tests.support.tinyproxy import VIA_NAME, Tinyproxy
from tests.support.tls import Certificates, make_certificates
from webhook_service.embedded import free_port

pytestmark = pytest.mark.integration

USER = "courier"
PASSWORD = "eg-0ut_pr0xy-pw"
# The credentials as they would show if something logged the Proxy-Authorization header.
ENCODED = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tinyproxy]:
    running = Tinyproxy(tmp_path_factory.mktemp("tinyproxy"), free_port(), (USER, PASSWORD))
    running.start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, proxy: Tinyproxy, certificates: Certificates
) -> Iterator[Stack]:
    running = start_stack(
        tmp_path_factory.mktemp("proxied"),
        {
            "WEBHOOK_EGRESS_PROXY": proxy.url((USER, PASSWORD)),
            # The receivers are on loopback (so is the proxy, which needs no exemption).
            "WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8",
            # The workers trust the test's CA, as they would a public one: verification stays on.
            "SSL_CERT_FILE": str(certificates.ca),
            # The most the service ever logs, for the password check at the end.
            "WEBHOOK_LOG_LEVEL": "DEBUG",
        },
    )
    yield running
    running.stop()


@pytest.fixture
async def tls_receiver(certificates: Certificates) -> AsyncIterator[Receiver]:
    running = Receiver(ssl_context=certificates.server_context())
    await running.start()
    yield running
    await running.stop()


async def _delivery(api: Api, event_id: str) -> dict[str, Any]:
    """The event's one delivery, as GET /v1/deliveries/{id} shows it."""
    _, event, _ = await api.call("GET", f"/v1/events/{event_id}")
    [listed] = event["deliveries"]
    status, body, _ = await api.call("GET", f"/v1/deliveries/{listed['id']}")
    assert status == 200, body
    found: dict[str, Any] = body
    return found


async def _settled(api: Api, event_id: str, status: str) -> dict[str, Any]:
    """The delivery once it has ``status`` and its attempt log holds every attempt (the
    log is SQL's, which the shipper fills a moment after the record)."""
    seen: dict[str, Any] = {}

    async def reached() -> bool:
        if set((await delivery_statuses(api, event_id)).values()) != {status}:
            return False
        seen.update(await _delivery(api, event_id))
        return bool(len(seen["attempt_log"]) == seen["attempts"])

    await wait_for(reached)
    return seen


async def test_a_delivery_goes_through_the_proxy_with_its_credentials(
    api: Api, receiver: Receiver, proxy: Tinyproxy
) -> None:
    await create_endpoint(api, receiver, "via-proxy", ["proxy.http"])
    event_id = await send_event(api, "proxy.http", {"n": 1})
    delivery = await _settled(api, event_id, "succeeded")

    [got] = receiver.for_endpoint("via-proxy")
    assert got.verified and got.webhook_id == event_id
    headers = {name.lower(): value for name, value in got.headers.items()}
    # The proxy forwarded it (its Via), having taken the credentials off.
    assert VIA_NAME in headers["via"]
    assert "proxy-authorization" not in headers
    assert f"POST {receiver.url('via-proxy')} HTTP/1.1" in proxy.requests()
    # The attempt's record shows the request as we made it, without the proxy's credentials.
    [attempt] = delivery["attempt_log"]
    assert attempt["status_code"] == 200
    assert "proxy-authorization" not in attempt["request_headers"]

    # The proxy does demand them: without, it answers 407 and forwards nothing.
    async with (
        aiohttp.ClientSession() as session,
        session.post(receiver.url("via-proxy"), data=b"{}", proxy=proxy.url()) as refused,
    ):
        assert refused.status == 407
    assert len(receiver.for_endpoint("via-proxy")) == 1


async def test_https_goes_through_a_connect_tunnel(
    api: Api, tls_receiver: Receiver, proxy: Tinyproxy
) -> None:
    await create_endpoint(api, tls_receiver, "tunnelled", ["proxy.https"])
    event_id = await send_event(api, "proxy.https", {"n": 2})
    await _settled(api, event_id, "succeeded")

    [got] = tls_receiver.for_endpoint("tunnelled")
    assert got.verified and got.webhook_id == event_id
    assert f"CONNECT 127.0.0.1:{tls_receiver.port} HTTP/1.1" in proxy.requests()
    # Inside the tunnel the request is ours end to end: the proxy could add nothing to it.
    assert "via" not in {name.lower() for name in got.headers}


async def test_a_denied_address_is_refused_without_the_proxy_seeing_a_request(
    stack: Stack, api: Api, proxy: Tinyproxy
) -> None:
    # An API process that also allows 10.0.0.1 takes the endpoint; the workers allow only
    # loopback, so at the send their guard refuses it, before the proxy is asked.
    wider = settings_of({**stack.env, "WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8,10.0.0.1/32"})
    async with serve_api(wider) as (_, lenient):
        status, endpoint, _ = await lenient.call(
            "POST",
            "/v1/endpoints",
            json={
                "url": "http://10.0.0.1/hooks/internal",
                "event_types": ["proxy.denied"],
                "retry_schedule": [0],
            },
        )
        assert status == 201, endpoint
        try:
            before = proxy.requests()
            event_id = await send_event(api, "proxy.denied", {"n": 3})
            delivery = await _settled(api, event_id, "failed")
        finally:
            await lenient.call("DELETE", f"/v1/endpoints/{endpoint['id']}")
    [attempt] = delivery["attempt_log"]
    assert (attempt["status_code"], attempt["error"]) == (None, "destination_blocked")
    assert proxy.requests() == before
    assert "10.0.0.1" not in proxy.log.read_text()


async def test_with_the_proxy_down_attempts_fail_as_network_errors_and_it_arrives_later(
    api: Api, receiver: Receiver, proxy: Tinyproxy
) -> None:
    status, endpoint, _ = await api.call(
        "POST",
        "/v1/endpoints",
        json={
            "url": receiver.url("proxy-down"),
            "event_types": ["proxy.down"],
            "retry_schedule": [0] + [1] * 19,  # a retry a second for 19 s (20 at most)
        },
    )
    assert status == 201, endpoint
    api.created_endpoints.append(endpoint["id"])
    receiver.secrets["proxy-down"] = [endpoint["secret"]]

    proxy.stop()
    try:
        event_id = await send_event(api, "proxy.down", {"n": 4})

        async def retried() -> bool:
            return len((await _delivery(api, event_id))["attempt_log"]) >= 2

        await wait_for(retried)
        assert (await _delivery(api, event_id))["status"] == "pending"
    finally:
        proxy.start()
    delivery = await _settled(api, event_id, "succeeded")

    *failed, last = delivery["attempt_log"]
    assert len(failed) >= 2
    assert {(a["status_code"], a["error"]) for a in failed} == {(None, "connection")}
    assert (last["status_code"], last["error"]) == (200, None)
    # Nothing reached the receiver while the proxy was down; then exactly one delivery.
    assert [r.webhook_id for r in receiver.for_endpoint("proxy-down")] == [event_id]
    assert receiver.taken[("proxy-down", event_id)] == 1


def test_the_proxy_password_is_in_no_log(stack: Stack, proxy: Tinyproxy) -> None:
    # Last in the module: every send above, at DEBUG, in the worker's and scheduler's logs.
    logs = sorted(stack.directory.glob("*.log"))
    assert {path.name for path in logs} >= {"worker0.log", "scheduler.log"}
    worker_log = (stack.directory / "worker0.log").read_text(errors="replace")
    assert "attempt recorded" in worker_log  # the log does hold the sends
    shown: list[Path] = [*logs, proxy.log]
    for path in shown:
        text = path.read_text(errors="replace")
        assert PASSWORD not in text, path
        assert ENCODED not in text, path
