"""Endpoint health with real processes: 410 and exhausted deliveries disable an endpoint,
operational events reach the operations endpoint signed, disabled endpoints keep their
events, recovery re-sends them, and per-endpoint limits hold across workers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.conftest import Api, create_endpoint, finished_job, send_event, wait_for
from tests.support.logged import wait_logged
from tests.support.receiver import Receiver
from tests.support.stack import Stack, start_stack
from webhook_service.timeutil import iso, now_ms

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    # Disable at the first exhausted delivery; two requests at a time per endpoint; a long
    # request timeout, so a hanging receiver holds its sends for the whole test.
    running = start_stack(
        tmp_path_factory.mktemp("health"),
        extra={
            "WEBHOOK_DISABLE_AFTER": "0",
            "WEBHOOK_ENDPOINT_CONCURRENCY": "2",
            "WEBHOOK_REQUEST_TIMEOUT": "20",
        },
        workers=2,
    )
    yield running
    running.stop()


async def _ops_endpoint(api: Api, receiver: Receiver) -> None:
    status, body, _ = await api.call(
        "POST",
        "/v1/endpoints",
        json={"url": receiver.url("ops"), "event_types": ["ops.only"], "operations": True},
    )
    assert status == 201, body
    receiver.secrets["ops"] = [body["secret"]]
    api.created_endpoints.append(body["id"])


def _ops_events(receiver: Receiver, event_type: str) -> list[dict[str, Any]]:
    got = [json.loads(r.body) for r in receiver.for_endpoint("ops") if r.verified]
    return [e for e in got if e["type"] == event_type]


async def _endpoint(api: Api, endpoint_id: str) -> dict[str, Any]:
    status, body, _ = await api.call("GET", f"/v1/endpoints/{endpoint_id}")
    assert status == 200, body
    endpoint: dict[str, Any] = body
    return endpoint


async def _delivery(api: Api, event_id: str) -> dict[str, Any]:
    status, body, _ = await api.call("GET", f"/v1/events/{event_id}")
    assert status == 200, body
    deliveries: list[dict[str, Any]] = body["deliveries"]
    [delivery] = deliveries
    return delivery


async def test_410_disables_keeps_events_and_recover_resends_them(
    api: Api, receiver: Receiver, stack: Stack
) -> None:
    await _ops_endpoint(api, receiver)
    started = iso(now_ms() - 1000)
    receiver.behaviours["gone"] = lambda _name, _n: 410
    endpoint = await create_endpoint(api, receiver, "gone", ["health.gone"])

    first = await send_event(api, "health.gone", {"n": 1})

    async def disabled() -> bool:
        is_disabled: bool = (await _endpoint(api, endpoint["id"]))["disabled"]
        return is_disabled

    await wait_for(disabled)
    state = await _endpoint(api, endpoint["id"])
    assert state["disabled_reason"] == "gone"
    assert state["disabled_at"] is not None
    assert (await _delivery(api, first))["status"] == "disabled"
    assert (await _delivery(api, first))["last_status_code"] == 410

    async def told_disabled() -> bool:
        return bool(_ops_events(receiver, "endpoint.disabled"))

    await wait_for(told_disabled)
    [notice] = _ops_events(receiver, "endpoint.disabled")
    assert notice["data"] == {"endpoint_id": endpoint["id"], "reason": "gone"}
    # Operational events are in the history like any other.
    await wait_logged(stack.valkey.url)
    status, body, _ = await api.call(
        "GET", f"/v1/deliveries?event_type=endpoint.disabled&endpoint_id={api.created_endpoints[0]}"
    )
    assert status == 200 and body["data"], body

    # Events for a disabled endpoint are kept, not sent.
    second = await send_event(api, "health.gone", {"n": 2})
    assert (await _delivery(api, second))["status"] == "disabled"
    sent_before = len(receiver.for_endpoint("gone"))

    receiver.behaviours["gone"] = lambda _name, _n: 200
    # A recovery pages the SQL log: it covers what the log holds when it runs.
    await wait_logged(stack.valkey.url)
    status, body, _ = await api.call("POST", f"/v1/endpoints/{endpoint['id']}/enable")
    assert status == 200 and body["disabled"] is False and body["disabled_reason"] is None
    status, job, headers = await api.call(
        "POST", f"/v1/endpoints/{endpoint['id']}/recover", json={"since": started}
    )
    assert status == 202, job
    assert headers["Location"] == f"/v1/jobs/{job['id']}"

    finished = await finished_job(api, job["id"])
    assert (finished["matched"], finished["retried"]) == (2, 2)

    async def both_delivered() -> bool:
        statuses = {(await _delivery(api, e))["status"] for e in (first, second)}
        return statuses == {"succeeded"}

    await wait_for(both_delivered)
    resent = receiver.for_endpoint("gone")[sent_before:]
    assert sorted(r.webhook_id for r in resent) == sorted([first, second])
    assert all(r.verified for r in resent)

    async def told_recovered() -> bool:
        return bool(_ops_events(receiver, "endpoint.recovered"))

    await wait_for(told_recovered)
    assert _ops_events(receiver, "endpoint.recovered")[0]["data"] == {"endpoint_id": endpoint["id"]}


async def test_exhausted_deliveries_disable_a_failing_endpoint(
    api: Api, receiver: Receiver
) -> None:
    await _ops_endpoint(api, receiver)
    receiver.behaviours["broken"] = lambda _name, _n: 500
    endpoint = await create_endpoint(api, receiver, "broken", ["health.broken"])
    event_id = await send_event(api, "health.broken", {"n": 1})

    async def exhausted() -> bool:
        return bool(_ops_events(receiver, "delivery.exhausted")) and bool(
            _ops_events(receiver, "endpoint.disabled")
        )

    await wait_for(exhausted)
    [notice] = _ops_events(receiver, "delivery.exhausted")
    delivery = await _delivery(api, event_id)
    assert delivery["status"] == "failed"
    assert notice["data"] == {
        "delivery_id": delivery["id"],
        "event_id": event_id,
        "endpoint_id": endpoint["id"],
        "event_type": "health.broken",
        "attempts": 4,
        "last_status_code": 500,
        "last_error": None,
    }
    [disabled] = _ops_events(receiver, "endpoint.disabled")
    assert disabled["data"] == {"endpoint_id": endpoint["id"], "reason": "failing"}
    assert (await _endpoint(api, endpoint["id"]))["disabled_reason"] == "failing"


async def test_producers_cannot_post_operational_event_types(api: Api) -> None:
    status, body, _ = await api.call(
        "POST", "/v1/events", json={"type": "endpoint.disabled", "data": {}}
    )
    assert status == 422
    assert body["errors"][0]["pointer"] == "/type"


async def test_a_hanging_endpoint_does_not_slow_a_healthy_one(api: Api, receiver: Receiver) -> None:
    receiver.hang.add("stuck")
    stuck = await create_endpoint(api, receiver, "stuck", ["health.stuck"])
    await create_endpoint(api, receiver, "fine", ["health.fine"])
    stuck_events = [await send_event(api, "health.stuck", {"n": n}) for n in range(12)]
    fine_events = [await send_event(api, "health.fine", {"n": n}) for n in range(20)]

    async def fine_delivered() -> bool:
        statuses = {(await _delivery(api, e))["status"] for e in fine_events}
        return statuses == {"succeeded"}

    await wait_for(fine_delivered)
    # Every fresh delivery to the healthy endpoint went through while the stuck one's first
    # requests were still hanging (none has even timed out yet) ...
    assert {(await _delivery(api, e))["attempts"] for e in stuck_events} == {0}
    # ... and the stuck endpoint never held more than its two slots.
    assert receiver.peak_in_flight["stuck"] == 2
    status, body, _ = await api.call("DELETE", f"/v1/endpoints/{stuck['id']}")
    assert status == 204, body


async def test_a_slot_freed_at_the_limit_goes_straight_to_a_parked_delivery(
    api: Api, receiver: Receiver
) -> None:
    receiver.slow["busy"] = 0.2
    await create_endpoint(api, receiver, "busy", ["health.busy"])
    events = [await send_event(api, "health.busy", {"n": n}) for n in range(10)]

    async def all_delivered() -> bool:
        return {(await _delivery(api, e))["status"] for e in events} == {"succeeded"}

    # Two slots, 0.2 s a request: about a second when each finished send leases the next
    # parked delivery itself. Left to their fallback due entries, the parked ones would wait
    # a whole lease (20 s request timeout + 20 s), far beyond this bound.
    await wait_for(all_delivered, timeout=15)
    assert receiver.peak_in_flight["busy"] == 2
    assert len(receiver.for_endpoint("busy")) == 10


async def test_an_endpoint_rate_limit_spaces_the_requests(api: Api, receiver: Receiver) -> None:
    status, body, _ = await api.call(
        "POST",
        "/v1/endpoints",
        json={"url": receiver.url("paced"), "event_types": ["health.paced"], "rate_limit": 4},
    )
    assert status == 201, body
    receiver.secrets["paced"] = [body["secret"]]
    api.created_endpoints.append(body["id"])
    assert body["rate_limit"] == 4
    for n in range(12):
        await send_event(api, "health.paced", {"n": n})

    async def all_received() -> bool:
        return len(receiver.for_endpoint("paced")) >= 12

    await wait_for(all_received)
    times = [r.at for r in receiver.for_endpoint("paced")]
    # 4 per second with bursts of 4: the last 8 wait for the bucket, at least 2 s in all.
    assert times[-1] - times[0] >= 2.0 - 0.1


async def test_custom_headers_reach_the_receiver_and_ours_cannot_be_set(
    api: Api, receiver: Receiver
) -> None:
    url = receiver.url("custom")
    for name in (
        "Host",
        "content-length",
        "Webhook-Signature",
        "Transfer-Encoding",
        "X-Forwarded-For",
    ):
        status, body, _ = await api.call(
            "POST", "/v1/endpoints", json={"url": url, "headers": {name: "x"}}
        )
        assert status == 422, (name, body)
        assert body["errors"][0]["pointer"].startswith("/headers"), body
    status, body, _ = await api.call(
        "POST", "/v1/endpoints", json={"url": url, "headers": {"X-Bad": "a\r\nInjected: 1"}}
    )
    assert status == 422, body
    status, body, _ = await api.call(
        "POST",
        "/v1/endpoints",
        json={"url": url, "event_types": ["health.custom"], "headers": {"X-Tenant": "acme"}},
    )
    assert status == 201, body
    receiver.secrets["custom"] = [body["secret"]]
    api.created_endpoints.append(body["id"])
    assert body["headers"] == {"X-Tenant": "acme"}
    await send_event(api, "health.custom", {})

    async def received() -> bool:
        return bool(receiver.for_endpoint("custom"))

    await wait_for(received)
    [got] = receiver.for_endpoint("custom")
    assert got.verified
    assert got.headers["X-Tenant"] == "acme"
