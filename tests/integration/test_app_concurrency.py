"""The per-application cap on sends in flight (WEBHOOK_APP_CONCURRENCY), with a real Celery
worker (two pool processes of WEBHOOK_WORKER_MAX_IN_FLIGHT 100 sends each: 200 slots).

Tenant A has 50 endpoints whose receiver hangs until the sender gives up (a 1.5 s request
timeout); tenant B one healthy endpoint. B's 202 -> delivered latency is measured with A
idle, then while A's 1 000 deliveries hang, over long enough that A's first sends time out
and hand their slots on. Under the default cap A holds at most 50 sends and B's latency
stays near its baseline; with the cap off A's sends fill both processes (each endpoint may
hold 10: 500 in all) and B waits behind them.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import Api, wait_for
from tests.support.receiver import Receiver
from tests.support.stack import Stack, start_stack

pytestmark = pytest.mark.integration

HANGING = 50  # A's endpoints
A_EVENTS = 20  # each to every one of A's endpoints: 1 000 deliveries
B_EVENTS = 20  # in each phase
B_GAP = 0.1  # s between B's events: a phase spans a timeout of A's sends
# How long B's last event may wait before the rest count as undelivered: with the cap off,
# that is most of them.
B_WINDOW = 6.0
DEFAULT_CAP = 50  # config.py app_concurrency's default
TIMEOUT = 1.5  # WEBHOOK_REQUEST_TIMEOUT


@dataclass(frozen=True)
class Phase:
    latencies: list[float]  # s from each B 202 to its arrival; inf: not within the window

    @property
    def p90(self) -> float:
        ordered = sorted(self.latencies)
        return ordered[math.ceil(0.9 * len(ordered)) - 1]

    def __str__(self) -> str:
        got = [s for s in self.latencies if math.isfinite(s)]
        return (
            f"p90 {1000 * self.p90:.0f} ms, max of the delivered "
            f"{1000 * max(got, default=math.nan):.0f} ms, "
            f"{len(got)}/{len(self.latencies)} delivered"
        )


@dataclass(frozen=True)
class Measured:
    idle: Phase
    loaded: Phase
    peak_hanging: int  # the most of A's requests the receiver held at once
    a_requests: int  # how many of A's requests it had seen by the end

    @property
    def bound(self) -> float:
        """What B's loaded p90 may be: generous, since a busy machine's loop runs late."""
        return 3 * self.idle.p90 + 0.5


@pytest.fixture
def stack(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Stack]:
    """A stack of the test's own (its worker's settings are the test's parameter): a fresh
    store, as nothing of tenant A's backlog may reach the next test."""
    extra: dict[str, str] = request.param
    running = start_stack(tmp_path, {"WEBHOOK_REQUEST_TIMEOUT": str(TIMEOUT), **extra})
    yield running
    # A's sends still hang: a warm shutdown would wait them out.
    running.kill("worker0")
    running.stop()


@pytest.fixture
async def healthy() -> AsyncIterator[Receiver]:
    """B's receiver, on a port of its own: the worker's idle keep-alive connections to it
    never carry one of A's sends. Each of those opens its own connection, which A's receiver
    accepts only after it has seen the hang-up of the send before (a timed-out send is
    closed before it is recorded), so the most it counts at once is exact."""
    running = Receiver()
    await running.start()
    yield running
    await running.stop()


async def _app(api: Api, name: str) -> str:
    status, body, _ = await api.call("POST", "/v1/applications", json={"name": name})
    assert status == 201, body
    app_id: str = body["id"]
    return app_id


async def _endpoint(api: Api, receiver: Receiver, app_id: str, name: str) -> None:
    status, body, _ = await api.call(
        "POST", f"/v1/applications/{app_id}/endpoints", json={"url": receiver.url(name)}
    )
    assert status == 201, body
    receiver.secrets[name] = [body["secret"]]


async def _send(api: Api, app_id: str, data: dict[str, Any]) -> str:
    status, body, _ = await api.call(
        "POST", f"/v1/applications/{app_id}/events", json={"type": "load.ping", "data": data}
    )
    assert status == 202, body
    event_id: str = body["id"]
    return event_id


async def _b_phase(api: Api, healthy: Receiver, app_id: str, phase: str) -> Phase:
    """B's events, B_GAP apart, each timed from its 202 to its verified arrival."""
    accepted: dict[str, float] = {}
    for n in range(B_EVENTS):
        accepted[await _send(api, app_id, {"phase": phase, "n": n})] = time.monotonic()
        await asyncio.sleep(B_GAP)

    def arrivals() -> dict[str, float]:
        return {r.webhook_id: r.at for r in healthy.for_endpoint("b") if r.verified}

    async def all_arrived() -> bool:
        return accepted.keys() <= arrivals().keys()

    deadline = time.monotonic() + B_WINDOW
    while not await all_arrived() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    got = arrivals()
    return Phase([got[e] - at if e in got else math.inf for e, at in accepted.items()])


async def _measure(api: Api, hanging: Receiver, healthy: Receiver) -> Measured:
    a, b = await _app(api, "tenant A"), await _app(api, "tenant B")
    names = [f"a{n}" for n in range(HANGING)]
    hanging.hang.update(names)
    for name in names:
        await _endpoint(api, hanging, a, name)
    await _endpoint(api, healthy, b, "b")
    # The worker's first delivery: its event loop, HTTP session and scripts.
    warm = await _send(api, b, {"phase": "warm-up"})

    async def warmed() -> bool:
        return any(r.webhook_id == warm for r in healthy.for_endpoint("b"))

    await wait_for(warmed, timeout=30)

    idle = await _b_phase(api, healthy, b, "idle")

    def held() -> int:
        return sum(hanging.in_flight.get(name, 0) for name in names)

    peak = 0

    async def watch() -> None:
        nonlocal peak
        while True:
            peak = max(peak, held())
            await asyncio.sleep(0.01)

    watcher = asyncio.create_task(watch())
    try:
        await asyncio.gather(*(_send(api, a, {"n": n}) for n in range(A_EVENTS)))

        async def a_hangs() -> bool:
            return held() >= DEFAULT_CAP

        await wait_for(a_hangs, timeout=10, every=0.01)
        loaded = await _b_phase(api, healthy, b, "loaded")
    finally:
        watcher.cancel()
    measured = Measured(idle, loaded, peak, sum(hanging.requests[name] for name in names))
    print(
        f"\nB idle:   {idle}\nB loaded: {loaded}\nA's sends hanging at once, at most: {peak}"
        f" ({measured.a_requests} sent)"
    )
    return measured


@pytest.mark.parametrize("stack", [{}], indirect=True, ids=["default cap"])
async def test_a_tenants_hanging_endpoints_leave_another_tenants_latency_alone(
    api: Api, receiver: Receiver, healthy: Receiver
) -> None:
    measured = await _measure(api, receiver, healthy)

    # Reached (the load waits for it), and never passed, though A's first sends timed out
    # meanwhile and handed their slots on to the next.
    assert measured.peak_hanging == DEFAULT_CAP
    assert measured.a_requests > DEFAULT_CAP
    assert measured.loaded.p90 <= measured.bound, measured


@pytest.mark.parametrize(
    "stack", [{"WEBHOOK_APP_CONCURRENCY": "0"}], indirect=True, ids=["cap off"]
)
async def test_without_the_cap_the_hanging_tenant_starves_the_other(
    api: Api, receiver: Receiver, healthy: Receiver
) -> None:
    measured = await _measure(api, receiver, healthy)

    # Both processes full of A's sends: B waits for them to time out, then behind A's
    # queued wake-ups and retries.
    assert measured.peak_hanging > 2 * DEFAULT_CAP
    assert measured.loaded.p90 > measured.bound, measured
