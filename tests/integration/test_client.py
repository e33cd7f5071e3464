"""The producer clients against the real service: API on a socket, Valkey, Celery workers."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

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
from webhook_service.store.applications import DEFAULT_APP_ID
from webhook_service.store.keys import all_buckets, metrics


def stored_events(stack: Stack) -> int:
    """Events the store accepted (its counter, kept by the ingest script): an event stored
    twice would count twice."""
    client = redis.Redis.from_url(stack.valkey.url)
    try:
        return sum(int(client.hget(metrics(b), "events_accepted") or 0) for b in all_buckets())
    finally:
        client.close()


def delivered_to(api: Api, endpoint_id: str, event_id: str) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return await delivery_statuses(api, event_id) == {endpoint_id: "succeeded"}

    return check


async def test_a_fresh_service_takes_events_for_the_default_application(
    api: Api, stack: Stack
) -> None:
    # First in the module, on a store nothing has written to yet: no endpoint and no flat
    # POST /v1/events has made the default application, and "default" must still name it.
    client = WebhookClient(api.base, ADMIN_KEY)
    event_id = await asyncio.to_thread(client.send, "default", "client.first", {})
    _, event, _ = await api.call("GET", f"/v1/events/{event_id}")
    assert event["application"] == DEFAULT_APP_ID
    status, app, _ = await api.call("GET", "/v1/applications/default")
    assert (status, app["id"]) == (200, DEFAULT_APP_ID)


async def test_sync_client_sends_an_event_that_is_delivered(
    api: Api, receiver: Receiver, stack: Stack
) -> None:
    endpoint = await create_endpoint(api, receiver, "sync", ["client.sync"])
    client = WebhookClient(api.base, ADMIN_KEY)
    event_id = await asyncio.to_thread(client.send, "default", "client.sync", {"order": 1})
    await wait_for(delivered_to(api, endpoint["id"], event_id))
    (hook,) = receiver.for_endpoint("sync")
    assert hook.verified and hook.webhook_id == event_id


async def test_async_client_keys_and_typed_errors(api: Api, stack: Stack) -> None:
    before = stored_events(stack)
    async with AsyncWebhookClient(api.base, ADMIN_KEY) as client:
        first = await client.send(
            "default", "client.async", {"n": 1}, idempotency_key="client-async-1"
        )
        again = await client.send(
            "default", "client.async", {"n": 1}, idempotency_key="client-async-1"
        )
        assert first == again
        assert stored_events(stack) == before + 1
        with pytest.raises(IdempotencyKeyReused):
            await client.send("default", "client.async", {"n": 2}, idempotency_key="client-async-1")
        with pytest.raises(InvalidEvent) as invalid:
            await client.send("default", "not..a.type", {})
        assert invalid.value.problem.errors[0]["pointer"] == "/type"
    async with AsyncWebhookClient(api.base, "not-a-key") as stranger:
        with pytest.raises(AuthenticationError):
            await stranger.send("default", "client.async", {})
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
        send = asyncio.create_task(
            asyncio.to_thread(client.send, "default", "client.outage", {"n": 1})
        )
        # The first try met the outage (a 503, nothing stored) and the client is now waiting.
        assert await asyncio.to_thread(waiting.wait, 30)
        assert not send.done()
    finally:
        await asyncio.to_thread(stack.restart_valkey)
    event_id = await asyncio.wait_for(send, 90)

    assert stored_events(stack) == before + 1
    await wait_for(delivered_to(api, endpoint["id"], event_id), timeout=90)
    assert [hook.webhook_id for hook in receiver.for_endpoint("outage")] == [event_id]


async def test_a_send_creates_its_application_and_reaches_only_its_endpoints(
    api: Api, receiver: Receiver
) -> None:
    uid = f"client-{uuid.uuid4().hex[:12]}"
    # The default application's endpoint of the same type must never see the tenant's event.
    flat = await create_endpoint(api, receiver, "client-flat", ["client.tenant"])
    async with AsyncWebhookClient(api.base, ADMIN_KEY) as client:
        first = await client.send(uid, "client.tenant", {"n": 1}, create_as="Client Tenant")
        status, app, _ = await api.call("GET", f"/v1/applications/{uid}")
        assert status == 200, app
        assert (app["name"], app["uid"]) == ("Client Tenant", uid)
        endpoints: list[dict[str, Any]] = []
        for name, channels in (("client-eu", ["eu"]), ("client-us", ["us"]), ("client-any", None)):
            body = {"url": receiver.url(name), "event_types": ["client.tenant"]}
            if channels:
                body["channels"] = channels
            status, created, _ = await api.call(
                "POST", f"/v1/applications/{app['id']}/endpoints", json=body
            )
            assert status == 201, created
            receiver.secrets.setdefault(name, []).append(created["secret"])
            endpoints.append(created)
        eu, us, everything = endpoints
        # By id this time, and with a channel: the eu endpoint and the one without channels.
        second = await client.send(app["id"], "client.tenant", {"n": 2}, channels=["eu"])

    async def both_delivered() -> bool:
        statuses = await delivery_statuses(api, second)
        return all(statuses.get(e["id"]) == "succeeded" for e in (eu, everything))

    await wait_for(both_delivered, timeout=60)
    assert set(await delivery_statuses(api, second)) == {eu["id"], everything["id"]}
    _, event, _ = await api.call("GET", f"/v1/events/{second}")
    assert event["application"] == app["id"] and event["channels"] == ["eu"]
    # The first event found the application empty: it was created with it, nothing else.
    assert await delivery_statuses(api, first) == {}
    assert [h.webhook_id for h in receiver.for_endpoint("client-eu")] == [second]
    assert all(h.verified for h in receiver.for_endpoint("client-any"))
    assert receiver.for_endpoint("client-us") == [] and us["channels"] == ["us"]
    assert receiver.for_endpoint("client-flat") == [] and flat["application"] != app["id"]
    for created in endpoints:
        await api.call("DELETE", f"/v1/applications/{app['id']}/endpoints/{created['id']}")


async def test_a_missing_application_is_refused_once_and_not_created(
    api: Api, stack: Stack
) -> None:
    uid = f"client-missing-{uuid.uuid4().hex[:12]}"
    before = stored_events(stack)
    sleeps: list[float] = []
    client = WebhookClient(api.base, ADMIN_KEY, sleep=sleeps.append)
    with pytest.raises(InvalidEvent) as refused:
        await asyncio.to_thread(client.send, uid, "client.missing", {})
    assert refused.value.status == 404 and sleeps == []
    # A uid of dots is one more unknown uid, never resolved into the flat POST /v1/events.
    with pytest.raises(InvalidEvent) as dots:
        await asyncio.to_thread(client.send, "..", "client.missing", {})
    assert dots.value.status == 404 and sleeps == []
    _, page, _ = await api.call("GET", f"/v1/applications?uid={uid}")
    assert page["data"] == []
    assert stored_events(stack) == before
