"""The whole path, for real: API → Valkey → Celery worker → signed POST → delivery log."""

from __future__ import annotations

import asyncio
import json

from tests.integration.conftest import (
    Api,
    create_endpoint,
    delivery_statuses,
    send_event,
    settings_for,
    wait_for,
)
from tests.support.logged import wait_logged
from tests.support.receiver import Receiver
from tests.support.stack import Stack
from webhook_service.store.keys import QUEUE_FRESH, QUEUE_RETRY
from webhook_service.wakeup import TASK_DELIVER
from workers.celery_app import make_app


async def test_fan_out_by_type_is_exact_and_verified(api: Api, receiver: Receiver) -> None:
    invoices = await create_endpoint(api, receiver, "invoices", ["invoice.paid", "invoice.voided"])
    users = await create_endpoint(api, receiver, "users", ["user.created"])
    everything = await create_endpoint(api, receiver, "all", None)
    types = ["invoice.paid", "invoice.voided", "user.created", "order.shipped", "invoice.paid"]
    sent: dict[str, str] = {}
    for n in range(50):
        event_type = types[n % len(types)]
        sent[await send_event(api, event_type, {"n": n})] = event_type

    expected = {
        "invoices": {i for i, t in sent.items() if t.startswith("invoice.")},
        "users": {i for i, t in sent.items() if t == "user.created"},
        "all": set(sent),
    }

    async def all_arrived() -> bool:
        return all(
            {r.webhook_id for r in receiver.for_endpoint(name)} >= ids
            for name, ids in expected.items()
        )

    await wait_for(all_arrived, timeout=60)
    for name, ids in expected.items():
        got = receiver.for_endpoint(name)
        assert {r.webhook_id for r in got} == ids, name
        assert all(r.verified for r in got)
        for r in got:
            payload = json.loads(r.body)
            assert payload["type"] == sent[r.webhook_id]
            assert set(payload) == {"type", "timestamp", "data"}

    async def all_succeeded() -> bool:
        for event_id in sent:
            if set((await delivery_statuses(api, event_id)).values()) != {"succeeded"}:
                return False
        return True

    await wait_for(all_succeeded)
    ids = {invoices["id"], users["id"], everything["id"]}
    assert ids


async def test_failing_receiver_gets_retried_with_same_webhook_id(
    api: Api, receiver: Receiver, stack: Stack
) -> None:
    receiver.behaviours["flaky"] = lambda _name, n: 500 if n <= 2 else 200
    endpoint = await create_endpoint(api, receiver, "flaky")
    event_id = await send_event(api, "invoice.paid", {"amount": 1})

    async def succeeded() -> bool:
        return (await delivery_statuses(api, event_id)) == {endpoint["id"]: "succeeded"}

    await wait_for(succeeded)
    got = receiver.for_endpoint("flaky")
    assert len(got) == 3
    # The list and the attempt log are the SQL log's: once it has the last attempt.
    await wait_logged(stack.valkey.url)
    assert {r.webhook_id for r in got} == {event_id}
    status, page, _ = await api.call("GET", f"/v1/deliveries?event_id={event_id}")
    delivery_id = page["data"][0]["id"]
    status, delivery, _ = await api.call("GET", f"/v1/deliveries/{delivery_id}")
    assert status == 200
    assert delivery["attempts"] == 3
    assert [a["status_code"] for a in delivery["attempt_log"]] == [500, 500, 200]
    assert [a["number"] for a in delivery["attempt_log"]] == [1, 2, 3]
    assert delivery["attempt_log"][0]["response_body"] == "answer 500"


async def test_exhausted_delivery_fails_then_manual_retry_succeeds(
    api: Api, receiver: Receiver, stack: Stack
) -> None:
    broken = {"on": True}
    receiver.behaviours["down"] = lambda _name, _n: 503 if broken["on"] else 200
    endpoint = await create_endpoint(api, receiver, "down")
    event_id = await send_event(api, "invoice.paid", {"amount": 2})

    async def failed() -> bool:
        return (await delivery_statuses(api, event_id)) == {endpoint["id"]: "failed"}

    await wait_for(failed)
    assert len(receiver.for_endpoint("down")) == 4  # the whole schedule, no more
    await wait_logged(stack.valkey.url)
    status, page, _ = await api.call(
        "GET", f"/v1/deliveries?status=failed&endpoint_id={endpoint['id']}"
    )
    assert status == 200
    assert [d["event_id"] for d in page["data"]] == [event_id]

    broken["on"] = False
    delivery_id = page["data"][0]["id"]
    status, body, _ = await api.call("POST", f"/v1/deliveries/{delivery_id}/retry")
    assert status == 202, body

    async def succeeded() -> bool:
        return (await delivery_statuses(api, event_id)) == {endpoint["id"]: "succeeded"}

    await wait_for(succeeded)
    await wait_logged(stack.valkey.url)
    status, delivery, _ = await api.call("GET", f"/v1/deliveries/{delivery_id}")
    assert delivery["attempts"] == 5
    assert delivery["attempt_log"][-1]["status_code"] == 200


async def test_a_repeated_wake_up_never_sends_a_succeeded_delivery_again(
    api: Api, receiver: Receiver, stack: Stack
) -> None:
    endpoint = await create_endpoint(api, receiver, "once", ["once.test"])
    event_id = await send_event(api, "once.test", {"n": 1})

    async def succeeded() -> bool:
        return (await delivery_statuses(api, event_id)) == {endpoint["id"]: "succeeded"}

    await wait_for(succeeded)
    await wait_logged(stack.valkey.url)
    _, page, _ = await api.call("GET", f"/v1/deliveries?event_id={event_id}")
    delivery_id = page["data"][0]["id"]
    # The same Celery message again, on both queues, as a broker redelivery would do.
    app = make_app(settings_for(stack))
    for queue in (QUEUE_FRESH, QUEUE_RETRY):
        app.send_task(TASK_DELIVER, args=[delivery_id], queue=queue)
    marker = await send_event(api, "once.test", {"n": 2})  # queued behind the repeats

    async def marker_arrived() -> bool:
        return any(r.webhook_id == marker for r in receiver.for_endpoint("once"))

    await wait_for(marker_arrived)
    await asyncio.sleep(0.5)
    assert [r.webhook_id for r in receiver.for_endpoint("once")].count(event_id) == 1
    _, delivery, _ = await api.call("GET", f"/v1/deliveries/{delivery_id}")
    assert delivery["attempts"] == 1 and len(delivery["attempt_log"]) == 1
