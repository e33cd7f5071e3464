"""``portal_link`` on both producer clients: the sync one against the scripted stub server of
test_sync_client.py, the async one against aioresponses, as their sends are tested."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pytest
from aioresponses import aioresponses

from tests.unit.client.test_async_client import BASE, reply, sent
from tests.unit.client.test_sync_client import Stub, stub
from webhook_service.client import (
    AsyncWebhookClient,
    AuthenticationError,
    ClientError,
    InvalidEvent,
    PortalLink,
    ServerError,
    TransportError,
    WebhookClient,
)

__all__ = ["stub"]  # the fixture, shared with test_sync_client.py

URL = "https://hooks.example.com/portal/enter?token=whp_app_1.secret"
TOKEN = "whp_app_1.secret"
MADE = {
    "url": URL,
    "token": TOKEN,
    "expires_at": "2026-12-02T03:00:00.000Z",
    "capabilities": ["retry", "view"],
}
LINK = PortalLink(URL, TOKEN, datetime(2026, 12, 2, 3, tzinfo=UTC), frozenset({"view", "retry"}))
JSON = {"Content-Type": "application/json"}
PROBLEM = {"Content-Type": "application/problem+json"}


def test_sync_posts_what_was_asked_and_returns_the_link(stub: Stub) -> None:
    stub.answers = [(201, JSON, orjson.dumps(MADE))]
    client = WebhookClient(stub.url, "key-3")
    link = client.portal_link("cust/17", expires_in=600, capabilities=["retry"])
    assert link == LINK
    ((headers, body),) = stub.seen
    # The uid is one path segment, its slash escaped.
    assert stub.paths == ["/v1/applications/cust%2F17/portal-access"]
    assert orjson.loads(body) == {"read_only": False, "expires_in": 600, "capabilities": ["retry"]}
    assert headers["Authorization"] == "Bearer key-3"
    assert headers["Content-Type"] == "application/json"


def test_sync_leaves_the_defaults_to_the_service(stub: Stub) -> None:
    stub.answers = [(201, JSON, orjson.dumps(MADE))]
    WebhookClient(stub.url, "key-3").portal_link("default", read_only=True)
    ((_, body),) = stub.seen
    assert orjson.loads(body) == {"read_only": True}


@pytest.mark.parametrize(
    ("status", "error"),
    [(403, AuthenticationError), (404, ClientError), (422, ClientError), (503, ServerError)],
)
def test_sync_refusals_are_typed_and_asked_once(
    stub: Stub, status: int, error: type[Exception]
) -> None:
    problem = {"type": "about:blank", "title": "No", "detail": f"refused {status}"}
    stub.answers = [(status, PROBLEM, orjson.dumps(problem))]
    with pytest.raises(error) as raised:
        WebhookClient(stub.url, "key-3").portal_link("default")
    # A link is not an event: a 404 or 422 is no InvalidEvent.
    assert not isinstance(raised.value, InvalidEvent)
    assert f"refused {status}" in str(raised.value)
    assert len(stub.seen) == 1


def test_sync_a_dropped_connection_is_a_transport_error_not_a_retry(stub: Stub) -> None:
    stub.answers = ["drop", (201, JSON, orjson.dumps(MADE))]
    with pytest.raises(TransportError):
        WebhookClient(stub.url, "key-3").portal_link("default")
    assert len(stub.seen) == 1


def test_capabilities_as_one_string_is_refused_before_sending(stub: Stub) -> None:
    with pytest.raises(TypeError):
        WebhookClient(stub.url, "key-3").portal_link("default", capabilities="retry")
    assert stub.seen == []


PORTAL = BASE + "/v1/applications/acme/portal-access"


async def test_async_posts_what_was_asked_and_returns_the_link(http: aioresponses) -> None:
    reply(http, PORTAL, status=201, payload=MADE)
    async with AsyncWebhookClient(BASE, "key-1") as client:
        link = await client.portal_link("acme", capabilities=("retry",), read_only=False)
    assert link == LINK
    (call,) = sent(http, PORTAL)
    assert orjson.loads(call["data"]) == {"read_only": False, "capabilities": ["retry"]}
    assert call["headers"]["Authorization"] == "Bearer key-1"


async def test_async_refusals_are_typed_and_asked_once(http: aioresponses) -> None:
    reply(http, PORTAL, status=403, payload={"title": "Forbidden", "detail": "no scope"})
    reply(http, PORTAL, status=201, payload=MADE)
    async with AsyncWebhookClient(BASE, "key-1") as client:
        with pytest.raises(AuthenticationError, match="no scope"):
            await client.portal_link("acme")
    assert len(sent(http, PORTAL)) == 1


async def test_async_an_answer_without_a_link_is_a_transport_error(http: aioresponses) -> None:
    reply(http, PORTAL, status=201, payload={"url": "x"})
    async with AsyncWebhookClient(BASE, "key-1") as client:
        with pytest.raises(TransportError):
            await client.portal_link("acme")
