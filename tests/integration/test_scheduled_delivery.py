"""Scheduled delivery with real processes: Valkey on its AOF, a worker, the scheduler and an
API process of this module's own stack, at the default WEBHOOK_SCHEDULER_INTERVAL (0.5 s),
and a receiver that verifies every request with ``standardwebhooks``.

An event with a deliver_at lands after it, within a generous bound (no timed assertion of
the resolution: the figures are printed, and docs/benchmarks.md keeps them); its deliveries
are listed ``scheduled`` before, in Redis and in the SQL log; it survives a restart of
every process; a cancel ends them ``failed`` / ``cancelled`` with nothing sent, and a
second cancel is a 409."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.integration.conftest import Api, create_endpoint, delivery_statuses, wait_for
from tests.support.api_process import api_url, stack_with_apis
from tests.support.receiver import Receiver
from tests.support.restarts import kill_and_restart
from tests.support.stack import VALKEY, Stack
from webhook_service.timeutil import iso, now_ms, parse_iso

pytestmark = pytest.mark.integration

# Far more than the resolution (the scheduler's 0.5 s poll, a wake-up and a send): only a
# delivery that missed its time altogether, or went by the 30 s wake-up grace, passes it.
LATE_BOUND_S = 10.0


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    directory: Path = tmp_path_factory.mktemp("scheduled")
    with stack_with_apis(
        directory, ["api"], {"WEBHOOK_SCHEDULER_INTERVAL": "0.5"}, workers=1
    ) as running:
        yield running


@pytest.fixture
async def api(stack: Stack) -> AsyncIterator[Api]:
    async with aiohttp.ClientSession() as session:
        client = Api(session, api_url(stack, "api"))
        yield client
        for endpoint_id in client.created_endpoints:
            await client.call("DELETE", f"/v1/endpoints/{endpoint_id}")


async def _schedule(api: Api, event_type: str, **when: Any) -> dict[str, Any]:
    status, body, _ = await api.call(
        "POST", "/v1/events", json={"type": event_type, "data": {"n": 1}, **when}
    )
    assert status == 202, body
    accepted: dict[str, Any] = body
    return accepted


def _arrival_ms(mono: float, clock: tuple[float, float]) -> float:
    """A receiver's monotonic arrival time as wall-clock ms, by a (wall, monotonic) pair."""
    wall, base = clock
    return (wall + (mono - base)) * 1000


async def _listed(api: Api, event_id: str, status: str) -> set[str]:
    """The event's deliveries the SQL log's list shows in ``status``."""
    code, page, _ = await api.call(
        "GET", f"/v1/deliveries?event_id={event_id}&status={status}&limit=100"
    )
    assert code == 200, page
    return {d["id"] for d in page["data"]}


async def test_lands_after_deliver_at_and_is_listed_scheduled_before(
    api: Api, receiver: Receiver
) -> None:
    endpoint = await create_endpoint(api, receiver, "sched", ["sched.lands"])
    clock = (time.time(), time.monotonic())
    base = now_ms() + 3000
    # Spread over the scheduler's interval: the lateness ranges over its phase.
    due = {base + 137 * n for n in range(8)}
    accepted = {(await _schedule(api, "sched.lands", deliver_at=iso(at)))["id"]: at for at in due}
    first = next(iter(accepted))
    status, event, _ = await api.call("GET", f"/v1/events/{first}")
    assert status == 200 and event["deliver_at"] == iso(accepted[first])
    assert [d["status"] for d in event["deliveries"]] == ["scheduled"]
    [delivery] = event["deliveries"]
    status, shown, _ = await api.call("GET", f"/v1/deliveries/{delivery['id']}")
    assert (shown["status"], shown["next_attempt_at"]) == ("scheduled", iso(accepted[first]))

    async def logged_scheduled() -> bool:
        return await _listed(api, first, "scheduled") == {delivery["id"]}

    await wait_for(logged_scheduled, timeout=2.5)  # the log ships every 0.2 s
    assert receiver.for_endpoint("sched") == []
    # The events list says when each is due, as the event does (once the log has them all).

    async def listed_with_their_times() -> bool:
        status, page, _ = await api.call("GET", "/v1/events?type=sched.lands")
        assert status == 200, page
        return {e["id"]: e["deliver_at"] for e in page["data"]} == {
            event_id: iso(at) for event_id, at in accepted.items()
        }

    await wait_for(listed_with_their_times, timeout=2.5)

    async def all_arrived() -> bool:
        return {r.webhook_id for r in receiver.for_endpoint("sched")} == set(accepted)

    await wait_for(all_arrived, timeout=3 + 137 * 8 / 1000 + LATE_BOUND_S)
    late_ms = []
    for got in receiver.for_endpoint("sched"):
        assert got.verified
        lateness = _arrival_ms(got.at, clock) - accepted[got.webhook_id]
        assert 0 <= lateness < LATE_BOUND_S * 1000, (got.webhook_id, lateness)
        late_ms.append(lateness)
    print(
        f"\nscheduled delivery lateness over {len(late_ms)} events (ms): "
        f"min {min(late_ms):.0f}, median {statistics.median(late_ms):.0f}, "
        f"max {max(late_ms):.0f}"
    )

    # The worker records an attempt once the receiver has answered it: a moment after the
    # request arrived, longer on a loaded machine.
    async def recorded() -> bool:
        for event_id in accepted:
            if await delivery_statuses(api, event_id) != {endpoint["id"]: "succeeded"}:
                return False
        return True

    await wait_for(recorded, timeout=5)

    async def logged_succeeded() -> bool:
        return await _listed(api, first, "succeeded") == {delivery["id"]}

    await wait_for(logged_succeeded, timeout=5)
    assert await _listed(api, first, "scheduled") == set()


async def test_survives_a_restart_of_every_process(
    api: Api, receiver: Receiver, stack: Stack
) -> None:
    await create_endpoint(api, receiver, "sched-restart", ["sched.restart"])
    clock = (time.time(), time.monotonic())
    accepted = await _schedule(api, "sched.restart", delay_seconds=12)
    assert parse_iso(accepted["deliver_at"]) == parse_iso(accepted["timestamp"]) + 12_000
    await asyncio.sleep(1.5)  # appendfsync everysec: then a crash of the server loses nothing
    for name in (VALKEY, "worker0", "scheduler", "api"):
        # Off the event loop: the receiver in it answers whatever arrives meanwhile.
        await asyncio.to_thread(kill_and_restart, stack, name)
    status, event, _ = await api.call("GET", f"/v1/events/{accepted['id']}")
    # The restarts take a few seconds, more on a loaded machine: what they left is checked
    # while the delivery is still ahead, with a second's room for the read.
    ahead = time.time() * 1000 < parse_iso(accepted["deliver_at"]) - 1000
    if ahead:
        assert status == 200 and [d["status"] for d in event["deliveries"]] == ["scheduled"]
        assert receiver.for_endpoint("sched-restart") == []

    async def arrived() -> bool:
        return len(receiver.for_endpoint("sched-restart")) > 0

    await wait_for(arrived, timeout=12 + LATE_BOUND_S)
    got = receiver.for_endpoint("sched-restart")
    # Sent once; or, when the restarts outlasted the delay, perhaps again after a kill that
    # cut its first send short (at least once): the same event every time.
    if ahead:
        assert len(got) == 1
    assert all(r.verified and r.webhook_id == accepted["id"] for r in got)
    assert _arrival_ms(got[0].at, clock) >= parse_iso(accepted["deliver_at"])


async def test_cancel_sends_nothing_and_a_second_cancel_is_409(
    api: Api, receiver: Receiver
) -> None:
    first = await create_endpoint(api, receiver, "sched-cancel-1", ["sched.cancel"])
    second = await create_endpoint(api, receiver, "sched-cancel-2", ["sched.cancel"])
    accepted = await _schedule(api, "sched.cancel", delay_seconds=2)
    event_id = accepted["id"]

    status, body, _ = await api.call("DELETE", f"/v1/events/{event_id}/schedule")
    assert (status, body) == (200, {"cancelled": 2})
    nested = f"/v1/applications/{accepted['application']}/events/{event_id}/schedule"
    status, problem, headers = await api.call("DELETE", nested)
    assert status == 409 and headers["Content-Type"] == "application/problem+json", problem

    time.sleep(2 + 2.0)  # past its time by four scheduler passes
    assert receiver.for_endpoint("sched-cancel-1") == []
    assert receiver.for_endpoint("sched-cancel-2") == []
    status, event, _ = await api.call("GET", f"/v1/events/{event_id}")
    assert {(d["endpoint_id"], d["status"], d["last_error"]) for d in event["deliveries"]} == {
        (first["id"], "failed", "cancelled"),
        (second["id"], "failed", "cancelled"),
    }

    async def logged_failed() -> bool:
        return len(await _listed(api, event_id, "failed")) == 2

    await wait_for(logged_failed, timeout=5)


async def test_an_event_sent_at_once_has_no_schedule_to_cancel(
    api: Api, receiver: Receiver
) -> None:
    await create_endpoint(api, receiver, "sched-now", ["sched.now"])
    accepted = await _schedule(api, "sched.now", delay_seconds=0)

    async def arrived() -> bool:
        return len(receiver.for_endpoint("sched-now")) == 1

    await wait_for(arrived, timeout=10)
    status, _, _ = await api.call("DELETE", f"/v1/events/{accepted['id']}/schedule")
    assert status == 409
