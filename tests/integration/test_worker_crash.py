"""A worker killed with SIGKILL in the middle of a send: the delivery is not lost."""

from __future__ import annotations

from tests.integration.conftest import Api, create_endpoint, delivery_statuses, wait_for
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
    status, page, _ = await api.call("GET", f"/v1/deliveries?event_id={accepted['id']}")
    _, delivery, _ = await api.call("GET", f"/v1/deliveries/{page['data'][0]['id']}")
    # The killed attempt was never recorded; the successful one was, once.
    assert [a["status_code"] for a in delivery["attempt_log"]] == [200]
