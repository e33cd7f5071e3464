"""A FIFO endpoint under faults: 500 events, 30 % of its answers failing, two workers
SIGKILLed on the way. The receiver never sees an older event after a newer one (the head sent
again after a crash is the same event), never two at once, and a head that exhausts its
schedule lets the next one go."""

from __future__ import annotations

import asyncio
import itertools
import json
import random
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.conftest import Api, wait_for
from tests.support.receiver import Receiver, flaky
from tests.support.restarts import kill_and_restart
from tests.support.stack import Stack, start_stack

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

EVENTS = 500
TYPE = "fifo.chaos"
NAME = "fifo"
# Four attempts 50 ms apart: a head that fails all four (1 % of them at 30 %) is exhausted.
SCHEDULE = [0, 0.05, 0.05, 0.05]
# This one's every answer fails: its four attempts exhaust it for certain.
DOOMED = 100


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    running = start_stack(
        tmp_path_factory.mktemp("fifo"),
        workers=2,
        extra={
            # A lease of 1 + 1 + 1 = 3 s: a killed worker's head is sent again that soon.
            "WEBHOOK_REQUEST_TIMEOUT": "1",
            "WEBHOOK_LEASE_MARGIN": "1",
            # Retries are the scheduler's to wake: a short pass keeps the line moving.
            "WEBHOOK_SCHEDULER_INTERVAL": "0.05",
        },
    )
    yield running
    running.stop()


def _seq(body: bytes) -> int:
    number: int = json.loads(body)["data"]["seq"]
    return number


async def _backlog(api: Api, endpoint_id: str) -> int:
    status, stats, _ = await api.call("GET", f"/v1/endpoints/{endpoint_id}/stats")
    assert status == 200, stats
    pending: int = stats["backlog"]
    return pending


async def test_the_receiver_never_sees_an_older_event_after_a_newer_one(
    api: Api, receiver: Receiver, stack: Stack
) -> None:
    chance = flaky(random.Random(18), fail_rate=0.3)

    def answer(name: str, seen: int) -> int | None:
        latest = receiver.for_endpoint(NAME)[-1]
        return 500 if _seq(latest.body) == DOOMED else chance(name, seen)

    receiver.behaviours[NAME] = answer
    status, endpoint, _ = await api.call(
        "POST", "/v1/endpoints",
        json={"url": receiver.url(NAME), "event_types": [TYPE], "ordering": "fifo",
              "retry_schedule": SCHEDULE},
    )  # fmt: skip
    assert status == 201, endpoint
    assert endpoint["ordering"] == "fifo"
    receiver.secrets[NAME] = [endpoint["secret"]]
    api.created_endpoints.append(endpoint["id"])

    # Sent one after another: the order they were accepted in is their seq.
    events: dict[int, str] = {}
    for seq in range(EVENTS):
        status, accepted, _ = await api.call(
            "POST", "/v1/events", json={"type": TYPE, "data": {"seq": seq}}
        )
        assert status == 202, accepted
        events[seq] = accepted["id"]

    def reached() -> int:
        got = receiver.for_endpoint(NAME)
        return _seq(got[-1].body) if got else -1

    for worker, at in (("worker0", EVENTS // 3), ("worker1", 2 * EVENTS // 3)):

        async def past(mark: int = at) -> bool:
            return reached() >= mark

        await wait_for(past, timeout=120)
        # Off the event loop: the receiver answers the other worker meanwhile.
        await asyncio.to_thread(kill_and_restart, stack, worker)

    async def drained() -> bool:
        return await _backlog(api, endpoint["id"]) == 0

    await wait_for(drained, timeout=120)

    got = receiver.for_endpoint(NAME)
    assert all(r.verified for r in got)
    order = [_seq(r.body) for r in got]
    backwards = [(a, b) for a, b in itertools.pairwise(order) if b < a]
    assert not backwards, f"older after newer: {backwards[:5]}"
    assert receiver.peak_in_flight[NAME] == 1
    # Each event's every request carries its own id: a repeat is the same event.
    assert {r.webhook_id for r in got if _seq(r.body) == 7} == {events[7]}
    assert set(order) == set(range(EVENTS))

    # The doomed head had its four attempts, then the next one went.
    doomed = [i for i, seq in enumerate(order) if seq == DOOMED]
    assert len(doomed) >= len(SCHEDULE)
    assert order[doomed[-1] + 1] == DOOMED + 1
    statuses = await _statuses(api, events[DOOMED], events[DOOMED + 1])
    assert statuses == ["failed", "succeeded"]
    # Every other event reached it, or ran out of attempts on failing answers alone.
    taken = {seq for seq, r in zip(order, got, strict=True) if r.status == 200}
    for seq in set(range(EVENTS)) - taken:
        assert order.count(seq) >= len(SCHEDULE), seq


async def _statuses(api: Api, *event_ids: str) -> list[Any]:
    found = []
    for event_id in event_ids:
        status, event, _ = await api.call("GET", f"/v1/events/{event_id}")
        assert status == 200, event
        found += [d["status"] for d in event["deliveries"]]
    return found
