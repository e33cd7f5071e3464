"""Redis Sentinel: the primary dies with SIGKILL under load, a replica takes over, and every
event answered 202 is still delivered, signed, to its receiver.

A primary and a replica (both AOF) are watched by three sentinels (quorum 2). A Celery
worker, the scheduler and the API all use ``WEBHOOK_REDIS_URL=sentinel://...``. Producers
send without pause, retrying 503 and 409 with the same ``Idempotency-Key``, while the
primary is killed, the sentinels fail over, and the old primary comes back as a replica.

In ``strict`` mode the API waits for one replica before answering, and nothing may be lost.
In ``everysec`` mode replication is asynchronous, so an event answered just before the
kill may be missing on the promoted replica: those are counted and printed (the loss
window of docs/reliability.md), and every other accepted event must be delivered.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.integration.conftest import (
    Api,
    create_endpoint,
    send_event,
    serve_api,
    settings_for,
    wait_for,
)
from tests.support.receiver import Receiver
from tests.support.sentinel import SentinelTopology, start_sentinel_topology
from tests.support.stack import Stack, migrate_log, service_env
from webhook_service.embedded import EmbeddedValkey
from webhook_service.store.connect import replicas_to_confirm, sync_client

pytestmark = pytest.mark.integration

PRODUCERS = 4
# A steady trickle rather than a flood: enough events to land in every phase, few enough
# that one worker delivers them all in seconds.
PAUSE_S = 0.05
BEFORE_KILL_S = 1.5
AFTER_REJOIN_S = 1.5
EVENT_DEADLINE_S = 30.0


@dataclass
class Sent:
    event_id: str
    answered_at: float  # monotonic


@dataclass
class Load:
    """What the producers saw: every 202, and every 503 on the way."""

    accepted: dict[str, Sent] = field(default_factory=dict)
    unavailable: int = 0
    gave_up: int = 0

    async def produce(self, api: Api, producer: int, stop: asyncio.Event) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            await self._send_one(api, f"sentinel-{producer}-{n}")
            await asyncio.sleep(PAUSE_S)

    async def _send_one(self, api: Api, key: str) -> None:
        body = {"type": "failover.probe", "data": {"key": key}}
        deadline = time.monotonic() + EVENT_DEADLINE_S
        while time.monotonic() < deadline:
            status, reply, _ = await api.call(
                "POST", "/v1/events", json=body, headers={"Idempotency-Key": key}
            )
            if status == 202:
                self.accepted[key] = Sent(reply["id"], time.monotonic())
                return
            # 503: the store is unreachable mid-failover; 409: the first try of this key
            # is still in flight (strict mode). Both mean "the same key again, later". The
            # pause is shorter than Retry-After so the window is probed closely.
            assert status in (409, 503), (status, reply)
            self.unavailable += status == 503
            await asyncio.sleep(0.2)
        self.gave_up += 1


@pytest.fixture
def topology(tmp_path: Path) -> Iterator[SentinelTopology]:
    running = start_sentinel_topology(tmp_path / "redis")
    yield running
    running.stop()


@pytest.fixture
def processes(
    tmp_path: Path, topology: SentinelTopology, request: pytest.FixtureRequest
) -> Iterator[Stack]:
    env = service_env(
        topology.url, {"WEBHOOK_DURABILITY": request.param, "WEBHOOK_DATA_DIR": str(tmp_path)}
    )
    migrate_log(env)  # the scheduler starts only on a log at this release's revision
    # The Stack runs the worker and the scheduler; the topology owns every Valkey node (the
    # Stack's own is the first primary, and stopping it once killed does nothing).
    stack = Stack(tmp_path, topology.nodes[topology.primary_port()], env)
    stack.start("worker")
    stack.start("scheduler")
    yield stack
    stack.stop()


@pytest.fixture
async def api(processes: Stack) -> AsyncIterator[Api]:
    async with serve_api(settings_for(processes)) as (_app, client):
        yield client


@asynccontextmanager
async def _supervised(stack: Stack, name: str) -> AsyncIterator[list[int | None]]:
    """Start the process again whenever it exits, as the deployment's supervisor does
    (``restart: unless-stopped`` in docker-compose.yml): a Celery 5.7 worker can exit on a
    broker loss while it holds unacknowledged messages (docs/reliability.md). Yields the
    exit codes seen."""
    exits: list[int | None] = []

    async def watch() -> None:
        while True:
            await asyncio.sleep(0.5)
            code = stack.processes[name].poll()
            if code is not None:
                exits.append(code)
                stack.start(name, name)

    watcher = asyncio.create_task(watch())
    try:
        yield exits
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher


@dataclass
class Failover:
    killed_at: float  # monotonic
    promoted_in: float  # seconds from the kill to a primary every sentinel names
    promoted: int  # its port


async def _fail_over(topology: SentinelTopology) -> Failover:
    """Kill the primary, wait for the promotion, bring the old one back as a replica."""
    killed_at = time.monotonic()
    old = await asyncio.to_thread(topology.kill_primary)
    promoted = await asyncio.to_thread(topology.wait_failover, old)
    promoted_in = time.monotonic() - killed_at
    await asyncio.to_thread(topology.rejoin, old)
    await asyncio.to_thread(topology.wait_ready)
    return Failover(killed_at, promoted_in, promoted)


@pytest.mark.parametrize("processes", ["everysec", "strict"], indirect=True)
async def test_every_event_answered_202_survives_a_failover(
    api: Api, receiver: Receiver, topology: SentinelTopology, processes: Stack
) -> None:
    durability = processes.env["WEBHOOK_DURABILITY"]
    await create_endpoint(api, receiver, "failover", ["failover.probe"])
    # The worker is up and consuming before the load starts.
    first = await send_event(api, "failover.probe", {"warm": True})
    await wait_for(lambda: _delivered(receiver, {first}), timeout=30)

    load, stop = Load(), asyncio.Event()
    async with _supervised(processes, "worker") as worker_exits:
        producers = [asyncio.create_task(load.produce(api, n, stop)) for n in range(PRODUCERS)]
        await asyncio.sleep(BEFORE_KILL_S)
        failover = await _fail_over(topology)
        killed_at = failover.killed_at
        await asyncio.sleep(AFTER_REJOIN_S)
        stop.set()
        await asyncio.gather(*producers)

        accepted = {sent.event_id: sent for sent in load.accepted.values()}
        after_kill = [s for s in accepted.values() if s.answered_at > killed_at]
        lost: set[str] = set()

        async def settled() -> bool:
            # Each event is delivered, or gone from the store for good (so it never will be).
            for event_id in set(accepted) - _delivered_ids(receiver) - lost:
                status, _, _ = await api.call("GET", f"/v1/events/{event_id}")
                if status == 404:
                    lost.add(event_id)
            return set(accepted) <= _delivered_ids(receiver) | lost

        await wait_for(settled, timeout=45, every=0.5)
    window_ms = max((killed_at - accepted[e].answered_at) * 1000 for e in lost) if lost else 0.0
    first_after = min(s.answered_at for s in after_kill) - killed_at if after_kill else -1.0
    print(
        f"\nsentinel failover [{durability}]: {len(accepted)} accepted "
        f"({len(after_kill)} after the kill), {len(lost)} lost "
        f"(answered within {window_ms:.0f} ms before the kill), {load.unavailable} 503s, "
        f"promotion {failover.promoted_in:.1f} s, first 202 after the kill at {first_after:.1f} s, "
        f"worker restarts {len(worker_exits)}"
    )
    # One failover, the one we caused: a second would make the figures meaningless.
    assert await asyncio.to_thread(topology.primary_port) == failover.promoted
    assert load.gave_up == 0
    # The failover happened under load: refusals while it ran, acceptance after it.
    assert load.unavailable > 0
    assert after_kill
    assert all(got.verified for got in receiver.for_endpoint("failover"))
    if durability == "strict":
        assert not lost
    # Loss can only come from before the kill: what the new primary accepted, it keeps.
    assert all(accepted[event_id].answered_at <= killed_at for event_id in lost)


def _delivered_ids(receiver: Receiver) -> set[str]:
    return {got.webhook_id for got in receiver.for_endpoint("failover") if got.verified}


async def _delivered(receiver: Receiver, event_ids: set[str]) -> bool:
    return event_ids <= _delivered_ids(receiver)


def test_strict_mode_waits_for_a_replica_wherever_one_could_be_promoted(
    topology: SentinelTopology, valkey: EmbeddedValkey
) -> None:
    primary = topology.nodes[topology.primary_port()]
    for url, replicas in ((topology.url, 1), (primary.url, 1), (valkey.url, 0)):
        client = sync_client(url)
        try:
            assert replicas_to_confirm(client, url) == replicas, url
        finally:
            client.close()
