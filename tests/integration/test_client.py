"""The producer clients against the real service: API on a socket, Valkey, Celery workers."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable

import pytest
import redis

from tests.integration.conftest import Api, create_endpoint, delivery_statuses, wait_for
from tests.support.receiver import Receiver
from tests.support.stack import ADMIN_KEY, Stack
from webhook_service.client import (
    AsyncWebhookClient,
    AuthenticationError,
    Backoff,
    IdempotencyKeyReused,
    InvalidEvent,
    WebhookClient,
)
from webhook_service.store.keys import METRICS


def stored_events(stack: Stack) -> int:
    """Events the store accepted (its counter, kept by the ingest script): an event stored
    twice would count twice."""
    client = redis.Redis.from_url(stack.valkey.url)
    try:
        return int(client.hget(METRICS, "events_accepted") or 0)
    finally:
        client.close()


def delivered_to(api: Api, endpoint_id: str, event_id: str) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return await delivery_statuses(api, event_id) == {endpoint_id: "succeeded"}

    return check


async def test_sync_client_sends_an_event_that_is_delivered(
    api: Api, receiver: Receiver, stack: Stack
) -> None:
    endpoint = await create_endpoint(api, receiver, "sync", ["client.sync"])
    client = WebhookClient(api.base, ADMIN_KEY)
    event_id = await asyncio.to_thread(client.send, "client.sync", {"order": 1})
    await wait_for(delivered_to(api, endpoint["id"], event_id))
    (hook,) = receiver.for_endpoint("sync")
    assert hook.verified and hook.webhook_id == event_id


async def test_async_client_keys_and_typed_errors(api: Api, stack: Stack) -> None:
    before = stored_events(stack)
    async with AsyncWebhookClient(api.base, ADMIN_KEY) as client:
        first = await client.send("client.async", {"n": 1}, idempotency_key="client-async-1")
        again = await client.send("client.async", {"n": 1}, idempotency_key="client-async-1")
        assert first == again
        assert stored_events(stack) == before + 1
        with pytest.raises(IdempotencyKeyReused):
            await client.send("client.async", {"n": 2}, idempotency_key="client-async-1")
        with pytest.raises(InvalidEvent) as invalid:
            await client.send("not..a.type", {})
        assert invalid.value.problem.errors[0]["pointer"] == "/type"
    async with AsyncWebhookClient(api.base, "not-a-key") as stranger:
        with pytest.raises(AuthenticationError):
            await stranger.send("client.async", {})
    assert stored_events(stack) == before + 1


async def test_a_redis_outage_in_the_middle_of_a_send(
    api: Api, receiver: Receiver, stack: Stack
) -> None:
    endpoint = await create_endpoint(api, receiver, "outage", ["client.outage"])
    before = stored_events(stack)
    waiting = threading.Event()

    def sleep(seconds: float) -> None:
        waiting.set()
        time.sleep(seconds)

    client = WebhookClient(
        api.base, ADMIN_KEY, backoff=Backoff(max_attempts=10, base=0.2, deadline=90), sleep=sleep
    )
    stack.valkey.kill()
    try:
        send = asyncio.create_task(asyncio.to_thread(client.send, "client.outage", {"n": 1}))
        # The first try met the outage (a 503, nothing stored) and the client is now waiting.
        assert await asyncio.to_thread(waiting.wait, 30)
        assert not send.done()
    finally:
        await asyncio.to_thread(stack.restart_valkey)
    event_id = await asyncio.wait_for(send, 90)

    assert stored_events(stack) == before + 1
    await wait_for(delivered_to(api, endpoint["id"], event_id), timeout=90)
    assert [hook.webhook_id for hook in receiver.for_endpoint("outage")] == [event_id]
