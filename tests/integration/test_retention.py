"""Retention: the scheduler trims what is older than WEBHOOK_RETENTION_DAYS, a bounded slice
per pass, every record and index entry of it, and never a pending delivery."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from functools import partial

import redis

from tests.integration.conftest import Api, create_endpoint, send_event, settings_for, wait_for
from tests.support.receiver import Receiver
from tests.support.replies import text
from tests.support.stack import Stack
from webhook_service.ids import event_deliveries
from webhook_service.store import keys
from webhook_service.store.retention import DAY_MS, trim
from webhook_service.store.scripts import Scripts
from webhook_service.timeutil import now_ms, parse_iso
from workers.scheduler import Scheduler


class _NoWakeups:
    def wake_sync(self, delivery_ids: Sequence[str], *, retry: bool) -> None:
        return None


def _index_keys(client: redis.Redis, delivery_id: str) -> list[str]:
    """Every index key holding this delivery (the store is this module's own)."""
    return [
        key
        for key in client.scan_iter(match=keys.PREFIX + "idx:*")
        if client.type(key) == "zset" and client.zscore(key, delivery_id) is not None
    ]


async def _delivered(api: Api, event_id: str, status: str) -> bool:
    _, event, _ = await api.call("GET", f"/v1/events/{event_id}")
    return all(d["status"] == status for d in event["deliveries"])


async def test_trim_deletes_old_finished_history_in_bounded_slices(
    api: Api, receiver: Receiver, stack: Stack
) -> None:
    await create_endpoint(api, receiver, "ret1", ["retain.x"])
    await create_endpoint(api, receiver, "ret2", ["retain.x"])
    old = [await send_event(api, "retain.x", {"n": n}) for n in range(3)]
    for event_id in old:
        await wait_for(partial(_delivered, api, event_id, "succeeded"))
    await asyncio.sleep(0.005)
    cutoff = now_ms()
    await asyncio.sleep(0.005)
    stack.kill("worker0")  # from here on, deliveries stay pending
    young = await send_event(api, "retain.x", {"n": "young"})
    client = redis.Redis.from_url(stack.valkey.url, decode_responses=True)
    _, event, _ = await api.call("GET", f"/v1/events/{old[0]}")
    old_delivery = event["deliveries"][0]["id"]
    # Its attempt lives in its hash: no overflow list (its response body is short).
    assert client.hexists(keys.delivery(old_delivery), keys.attempt_field(1))
    assert not client.exists(keys.attempts(old_delivery))
    # Succeeded at its first try: in no status, class or count index (keys.UNINDEXED_*).
    assert len(_index_keys(client, old_delivery)) == 3
    # An old event whose delivery is still pending: retried by hand, with no worker running.
    stack.kill("scheduler")
    status, _, _ = await api.call("POST", f"/v1/deliveries/{old_delivery}/retry")
    assert status == 202

    scripts = Scripts(client)
    days = (now_ms() - cutoff) / DAY_MS
    # Several passes: a pass stops at its budget; reaching the cutoff starts a new round.
    trimmed = [trim(scripts, now_ms(), days, budget=2) for _ in range(20)]
    assert all(step.deliveries <= 2 for step in trimmed)
    assert sum(t.deliveries for t in trimmed) == 5  # 6 old ones, one of them pending
    assert sum(t.events for t in trimmed) == 2

    kept = {old[0], young}
    for event_id in [*old, young]:
        status, event, _ = await api.call("GET", f"/v1/events/{event_id}")
        assert status == (200 if event_id in kept else 404), event_id
    status, event, _ = await api.call("GET", f"/v1/events/{old[0]}")
    assert [d["id"] for d in event["deliveries"]] == [old_delivery]  # its finished one went
    status, page, _ = await api.call("GET", "/v1/events?type=retain.x")
    assert {e["id"] for e in page["data"]} == kept
    status, page, _ = await api.call("GET", "/v1/deliveries?event_type=retain.x&limit=250")
    assert len(page["data"]) == 3  # the pending old one and the young event's two
    for event_id in old[1:]:
        assert not client.exists(keys.event(event_id))
    left = list(client.scan_iter(match=keys.PREFIX + "delivery:*"))
    assert len(left) == 3  # three deliveries, their attempts in their hashes
    for key in client.scan_iter(match=keys.PREFIX + "idx:*"):
        if client.type(key) == "zset":
            members = set(client.zrange(key, 0, -1))
            assert not members - {old_delivery, old[0], young} - _young_deliveries(client, young)


def _young_deliveries(client: redis.Redis, event_id: str) -> set[str]:
    return set(event_deliveries(event_id, text(client.hget(keys.event(event_id), "dlvs"))))


async def test_the_scheduler_trims_on_its_pass(api: Api, receiver: Receiver, stack: Stack) -> None:
    for role, name in (("worker", "worker0"), ("scheduler", "scheduler")):
        if name not in stack.processes:
            stack.start(role, name)
    await create_endpoint(api, receiver, "ret3", ["retain.y"])
    event_id = await send_event(api, "retain.y", {})
    await wait_for(lambda: _delivered(api, event_id, "succeeded"))
    client = redis.Redis.from_url(stack.valkey.url, decode_responses=True)
    # This pass is the test's own: the scheduler process goes, and its lock with it.
    stack.kill("scheduler")
    client.delete(keys.SCHEDULER_LOCK)
    created = parse_iso((await api.call("GET", f"/v1/events/{event_id}"))[1]["timestamp"])
    await asyncio.sleep(0.005)
    settings = settings_for(stack).model_copy(
        update={"retention_days": (now_ms() - created) / DAY_MS}
    )
    scheduler = Scheduler(client, _NoWakeups(), settings)
    # The pass must come at least a millisecond after the window was measured, or the
    # event sits exactly on the cut-off and is (rightly) kept.
    await asyncio.sleep(0.005)
    before = now_ms()
    scheduler.tick()
    assert (await api.call("GET", f"/v1/events/{event_id}"))[0] == 404
    assert int(client.get(keys.SCHEDULER_TICK) or 0) >= before
