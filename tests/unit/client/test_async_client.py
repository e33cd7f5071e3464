"""AsyncWebhookClient at the HTTP edge: aioresponses stands in for the service."""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson
import pytest
from aioresponses import aioresponses
from yarl import URL

from tests.support.mock_http import CompatResponse
from webhook_service.client import (
    AsyncWebhookClient,
    AuthenticationError,
    Backoff,
    InvalidEvent,
    ServerError,
    TransportError,
)

BASE = "http://api.internal:8000"
EVENTS = BASE + "/v1/applications/default/events"
ACCEPTED = {"id": "msg_1", "type": "invoice.paid", "timestamp": "t", "deliveries": 1}


def reply(http: aioresponses, url: str = EVENTS, **kwargs: Any) -> None:
    http.post(URL(url, encoded=True), response_class=CompatResponse, **kwargs)


def sent(http: aioresponses, url: str = EVENTS) -> list[dict[str, Any]]:
    return [call.kwargs for call in http.requests.get(("POST", URL(url, encoded=True)), [])]


class Sleeps(list[float]):
    async def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


async def test_a_send_returns_the_event_id(http: aioresponses, sleeps: Sleeps) -> None:
    reply(http, status=202, payload=ACCEPTED)
    async with AsyncWebhookClient(BASE + "/", "key-1", sleep=sleeps) as client:
        assert await client.send("default", "invoice.paid", {"n": 1}) == "msg_1"
    (call,) = sent(http)
    assert orjson.loads(call["data"]) == {"type": "invoice.paid", "data": {"n": 1}}
    assert call["headers"]["Authorization"] == "Bearer key-1"
    assert call["headers"]["Idempotency-Key"]
    assert sleeps == []


async def test_retries_reuse_one_key_and_honour_retry_after(
    http: aioresponses, sleeps: Sleeps
) -> None:
    reply(http, status=503, headers={"Retry-After": "3"}, body=b"{}")
    reply(http, exception=aiohttp.ClientConnectionError("refused"))
    reply(http, status=429, body=b"")
    reply(http, status=202, payload=ACCEPTED)
    async with AsyncWebhookClient(BASE, "k", sleep=sleeps) as client:
        assert await client.send("default", "invoice.paid", {}) == "msg_1"
    keys = {call["headers"]["Idempotency-Key"] for call in sent(http)}
    assert len(sent(http)) == 4 and len(keys) == 1
    assert len(sleeps) == 3 and 3.0 <= sleeps[0] <= 3.3


async def test_a_given_key_is_sent_as_is(http: aioresponses, sleeps: Sleeps) -> None:
    reply(http, status=202, payload=ACCEPTED)
    async with AsyncWebhookClient(BASE, "k", sleep=sleeps) as client:
        await client.send("default", "invoice.paid", {}, idempotency_key="invoice-42")
    assert sent(http)[0]["headers"]["Idempotency-Key"] == "invoice-42"


async def test_a_4xx_is_a_typed_error_and_is_not_retried(
    http: aioresponses, sleeps: Sleeps
) -> None:
    problem = {
        "type": "https://webhook-service.dev/problems/validation-failed",
        "title": "Validation failed",
        "status": 422,
        "detail": "no",
        "instance": "/v1/applications/default/events",
        "errors": [{"pointer": "/type", "detail": "bad"}],
    }
    reply(http, status=422, payload=problem, content_type="application/problem+json")
    reply(http, status=401, payload={**problem, "status": 401, "type": "x/unauthorized"})
    async with AsyncWebhookClient(BASE, "k", sleep=sleeps) as client:
        with pytest.raises(InvalidEvent) as raised:
            await client.send("default", "a..b", {})
        assert raised.value.problem.errors[0]["pointer"] == "/type"
        with pytest.raises(AuthenticationError):
            await client.send("default", "a", {})
    assert len(sent(http)) == 2 and sleeps == []


async def test_retries_run_out(http: aioresponses, sleeps: Sleeps) -> None:
    for _ in range(3):
        reply(http, exception=TimeoutError())
    async with AsyncWebhookClient(BASE, "k", backoff=Backoff(max_attempts=3), sleep=sleeps) as c:
        with pytest.raises(TransportError):
            await c.send("default", "a", {})
    for _ in range(2):
        reply(http, status=503, body=b"")
    async with AsyncWebhookClient(BASE, "k", backoff=Backoff(max_attempts=2), sleep=sleeps) as c:
        with pytest.raises(ServerError) as raised:
            await c.send("default", "a", {})
    assert raised.value.status == 503
    assert len(sent(http)) == 5 and len(sleeps) == 3


async def test_a_session_passed_in_is_left_open(http: aioresponses, sleeps: Sleeps) -> None:
    reply(http, status=202, payload=ACCEPTED)
    async with aiohttp.ClientSession() as session:
        async with AsyncWebhookClient(BASE, "k", session=session, sleep=sleeps) as client:
            await client.send("default", "a", {})
        assert not session.closed


async def test_an_application_by_uid_with_channels_and_the_name_to_create_it_with(
    http: aioresponses, sleeps: Sleeps
) -> None:
    url = BASE + "/v1/applications/acme%2Feu/events"
    reply(http, url, status=202, payload=ACCEPTED)
    async with AsyncWebhookClient(BASE, "k", sleep=sleeps) as client:
        sent_id = await client.send(
            "acme/eu", "invoice.paid", {"n": 1}, channels=["billing"], create_as="Acme EU"
        )
    assert sent_id == "msg_1"
    (call,) = sent(http, url)
    assert orjson.loads(call["data"]) == {
        "type": "invoice.paid",
        "data": {"n": 1},
        "channels": ["billing"],
        "application": {"name": "Acme EU"},
    }


async def test_a_uid_of_dots_is_never_resolved_into_another_route(
    http: aioresponses, sleeps: Sleeps
) -> None:
    url = BASE + "/v1/applications/%2E%2E/events"
    reply(http, url, status=202, payload=ACCEPTED)
    async with AsyncWebhookClient(BASE, "k", sleep=sleeps) as client:
        assert await client.send("..", "invoice.paid", {}) == "msg_1"
    assert len(sent(http, url)) == 1


async def test_a_missing_application_is_a_refused_event_and_is_not_retried(
    http: aioresponses, sleeps: Sleeps
) -> None:
    url = BASE + "/v1/applications/nobody/events"
    missing = {
        "type": "https://webhook-service.dev/problems/not-found",
        "title": "Not found",
        "status": 404,
        "detail": "No application has this id or uid.",
    }
    reply(http, url, status=404, payload=missing, content_type="application/problem+json")
    async with AsyncWebhookClient(BASE, "k", sleep=sleeps) as client:
        with pytest.raises(InvalidEvent) as raised:
            await client.send("nobody", "invoice.paid", {})
    assert raised.value.status == 404 and "application" in raised.value.problem.detail
    assert len(sent(http, url)) == 1 and sleeps == []
