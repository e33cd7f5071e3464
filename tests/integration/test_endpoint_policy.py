"""An endpoint's own retry policy against real workers: its schedule decides its deliveries'
attempts and their ``next_attempt_at``, its timeout cuts its requests, its lease covers that
timeout; an endpoint without one keeps the global settings in the same run."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from redis.asyncio import Redis

from tests.integration.conftest import Api, send_event, wait_for
from tests.support.receiver import Receiver
from tests.support.stack import Stack, start_stack
from webhook_service.store import keys
from webhook_service.timeutil import now_ms, parse_iso

pytestmark = pytest.mark.integration

# The global policy, far from the endpoints' own: five attempts 6 s apart, 8 s a request
# (the lease then lasts 8 + 1 (connect) + 15 (margin) = 24 s).
GLOBAL_DELAY = 6.0
GLOBAL_TIMEOUT = 8.0
JITTER = 0.2  # the settings' default, which the endpoints' own schedules keep


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    running = start_stack(
        tmp_path_factory.mktemp("policy"),
        extra={
            "WEBHOOK_RETRY_SCHEDULE": ",".join(["0"] + [f"{GLOBAL_DELAY:g}"] * 4),
            "WEBHOOK_REQUEST_TIMEOUT": f"{GLOBAL_TIMEOUT:g}",
        },
    )
    yield running
    running.stop()


async def _endpoint(
    api: Api, receiver: Receiver, name: str, event_type: str, **policy: Any
) -> dict[str, Any]:
    status, body, _ = await api.call(
        "POST",
        "/v1/endpoints",
        json={"url": receiver.url(name), "event_types": [event_type], **policy},
    )
    assert status == 201, body
    receiver.secrets.setdefault(name, []).append(body["secret"])
    api.created_endpoints.append(body["id"])
    created: dict[str, Any] = body
    return created


async def _delivery_ids(api: Api, event_id: str, count: int) -> dict[str, str]:
    """Endpoint id -> its delivery's id, once the event lists ``count`` deliveries."""
    found: dict[str, str] = {}

    async def listed() -> bool:
        _, event, _ = await api.call("GET", f"/v1/events/{event_id}")
        found.update({d["endpoint_id"]: d["id"] for d in event["deliveries"]})
        return len(found) == count

    await wait_for(listed)
    return found


async def _delivery(api: Api, delivery_id: str) -> dict[str, Any]:
    status, body, _ = await api.call("GET", f"/v1/deliveries/{delivery_id}")
    assert status == 200, body
    found: dict[str, Any] = body
    return found


async def _next_delay(api: Api, delivery_id: str) -> float:
    """Seconds from a failed attempt's record to the next attempt it scheduled, read from the
    delivery as GET shows it while it waits (its ``updated_at`` is the record's time)."""
    seen: dict[str, Any] = {}

    async def waiting() -> bool:
        seen.update(await _delivery(api, delivery_id))
        return bool(seen["status"] == "pending" and seen["attempts"] >= 1)

    await wait_for(waiting, every=0.02)
    return (parse_iso(seen["next_attempt_at"]) - parse_iso(seen["updated_at"])) / 1000


async def test_an_endpoint_schedule_decides_its_attempts_and_another_keeps_the_global(
    api: Api, receiver: Receiver
) -> None:
    own = await _endpoint(api, receiver, "own", "policy.schedule", retry_schedule=[0, 1, 1])
    plain = await _endpoint(api, receiver, "plain", "policy.schedule")
    assert (own["retry_schedule"], plain["retry_schedule"]) == ([0, 1, 1], None)
    receiver.behaviours["own"] = receiver.behaviours["plain"] = lambda _n, _s: 500
    event_id = await send_event(api, "policy.schedule", {"n": 1})
    ids = await _delivery_ids(api, event_id, 2)

    # next_attempt_at follows each endpoint's schedule: 1 s for one, 6 s for the other
    # (each with the ±20 % jitter).
    assert 1 - JITTER <= await _next_delay(api, ids[own["id"]]) <= 1 + JITTER
    plain_delay = await _next_delay(api, ids[plain["id"]])
    assert GLOBAL_DELAY * (1 - JITTER) <= plain_delay <= GLOBAL_DELAY * (1 + JITTER)

    async def own_failed() -> bool:
        return bool((await _delivery(api, ids[own["id"]]))["status"] == "failed")

    await wait_for(own_failed)
    # Its budget is its schedule's length: three attempts, not the global five.
    assert (await _delivery(api, ids[own["id"]]))["attempts"] == 3
    sent = receiver.for_endpoint("own")
    assert len(sent) == 3 and {r.webhook_id for r in sent} == {event_id}
    gaps = [later.at - earlier.at for earlier, later in itertools.pairwise(sent)]
    assert all(gap >= 1 - JITTER for gap in gaps), gaps
    # The other is still within the global schedule.
    assert (await _delivery(api, ids[plain["id"]]))["status"] == "pending"


async def test_an_endpoint_timeout_cuts_its_request_within_the_global_one(
    api: Api, receiver: Receiver
) -> None:
    endpoint = await _endpoint(
        api, receiver, "brief", "policy.timeout", timeout_seconds=1, retry_schedule=[0]
    )
    receiver.hang.add("brief")
    event_id = await send_event(api, "policy.timeout", {"n": 2})
    delivery_id = (await _delivery_ids(api, event_id, 1))[endpoint["id"]]

    async def logged() -> bool:
        found = await _delivery(api, delivery_id)
        return found["status"] == "failed" and len(found["attempt_log"]) == 1

    await wait_for(logged)
    found = await _delivery(api, delivery_id)
    [attempt] = found["attempt_log"]
    assert (found["last_error"], attempt["error"]) == ("timeout", "timeout")
    # Cut at its own second, not at the global 8 s. (A millisecond early at most: uvloop's
    # timers run on libuv's clock, in whole milliseconds, and fired at 999 ms once.)
    assert 990 <= attempt["duration_ms"] < GLOBAL_TIMEOUT * 1000


async def test_the_lease_covers_an_endpoint_timeout_past_the_global_lease(
    api: Api, receiver: Receiver, stack: Stack
) -> None:
    endpoint = await _endpoint(api, receiver, "patient", "policy.lease", timeout_seconds=60)
    receiver.hang.add("patient")
    event_id = await send_event(api, "policy.lease", {"n": 3})
    delivery_id = (await _delivery_ids(api, event_id, 1))[endpoint["id"]]

    async def hanging() -> bool:
        return receiver.in_flight.get("patient", 0) > 0

    await wait_for(hanging)
    client = Redis.from_url(stack.valkey.url, decode_responses=True)
    try:
        lease_until = int(await client.hget(keys.delivery(delivery_id), "lease_until") or 0)
    finally:
        await client.aclose()
    # The global lease (24 s) would run out mid-request and let another worker send it
    # again; this one outlasts the endpoint's 60 s.
    assert lease_until - now_ms() > 60_000


async def test_the_policy_is_checked_named_and_cleared_on_both_routes(
    api: Api, receiver: Receiver
) -> None:
    status, refused, _ = await api.call(
        "POST", "/v1/endpoints", json={"url": receiver.url("x"), "retry_schedule": [0] * 21}
    )
    assert status == 422, refused
    assert [e["pointer"] for e in refused["errors"]] == ["/retry_schedule"]
    endpoint = await _endpoint(
        api, receiver, "kept", "policy.api", retry_schedule=[0, 5], timeout_seconds=2.5
    )
    nested = f"/v1/applications/{endpoint['application']}/endpoints/{endpoint['id']}"
    status, refused, _ = await api.call("PATCH", nested, json={"timeout_seconds": 61})
    assert status == 422, refused
    assert [e["pointer"] for e in refused["errors"]] == ["/timeout_seconds"]
    # A PATCH of one field keeps the other; null gives back the global setting.
    status, patched, _ = await api.call("PATCH", nested, json={"retry_schedule": None})
    assert status == 200, patched
    assert (patched["retry_schedule"], patched["timeout_seconds"]) == (None, 2.5)
    _, read, _ = await api.call("GET", f"/v1/endpoints/{endpoint['id']}")
    assert (read["retry_schedule"], read["timeout_seconds"]) == (None, 2.5)
