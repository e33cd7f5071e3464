"""A worker killed with SIGKILL in the middle of a send: the delivery is not lost."""

from __future__ import annotations

import asyncio

from tests.integration.conftest import Api, create_endpoint, delivery_statuses, wait_for
from tests.support.logged import wait_logged
from tests.support.receiver import Receiver
from tests.support.stack import Stack


async def test_kill_9_worker_mid_send_then_delivered(
    api: Api, receiver: Receiver, stack: Stack
) -> None:
    receiver.hang.add("slow")  # the first request never gets an answer
    endpoint = await create_endpoint(api, receiver, "slow", ["crash.test"])
    status, accepted, _ = await api.call(
        "POST", "/v1/events", json={"type": "crash.test", "data": {}}
    )
    assert status == 202

    async def in_flight() -> bool:
        return len(receiver.for_endpoint("slow")) == 1

    await wait_for(in_flight)
    # The whole worker (main process and its pool) dies; its Celery message stays unacked
    # and the lease stays held: only the scheduler's lease-expiry repair can save it.
    stack.kill("worker0")
    receiver.hang.discard("slow")
    stack.start("worker", "worker0")

    async def delivered() -> bool:
        return (await delivery_statuses(api, accepted["id"])) == {endpoint["id"]: "succeeded"}

    await wait_for(delivered, timeout=90)
    got = receiver.for_endpoint("slow")
    assert len(got) == 2  # the lost attempt and the one that succeeded
    assert {r.webhook_id for r in got} == {accepted["id"]}
    await wait_logged(stack.valkey.url)  # the list and the attempt log are the SQL log's
    status, page, _ = await api.call("GET", f"/v1/deliveries?event_id={accepted['id']}")
    _, delivery, _ = await api.call("GET", f"/v1/deliveries/{page['data'][0]['id']}")
    # The killed attempt was never recorded; the successful one was, once.
    assert [a["status_code"] for a in delivery["attempt_log"]] == [200]


async def test_sigterm_lets_a_send_in_flight_finish(
    api: Api, receiver: Receiver, stack: Stack
) -> None:
    receiver.slow["drain"] = 2.0  # answers 200, but only after two seconds
    endpoint = await create_endpoint(api, receiver, "drain", ["crash.drain"])
    status, accepted, _ = await api.call(
        "POST", "/v1/events", json={"type": "crash.drain", "data": {}}
    )
    assert status == 202

    async def in_flight() -> bool:
        return len(receiver.for_endpoint("drain")) == 1

    await wait_for(in_flight)
    # A supervisor stopping the worker: the send it is waiting on finishes and is recorded
    # before the process exits, so nothing is left for a lease to repair.
    # (In a thread: the receiver answering that send runs on this test's event loop.)
    assert await asyncio.to_thread(stack.terminate, "worker0") == 0
    try:
        assert await delivery_statuses(api, accepted["id"]) == {endpoint["id"]: "succeeded"}
        assert len(receiver.for_endpoint("drain")) == 1
    finally:
        stack.start("worker", "worker0")
