"""Fan-out width: what accepting an event costs the API at 1 and at 1 000 subscribed endpoints.

Two passes per width. With the workers stopped and the scheduler paused, MONITOR counts
the commands the API sends per accepted event (its round trips, the script call that is
the atomic step among them) apart from those the script runs inside Redis. Then, workers
running, events go one at a time: the 202's latency, and how long from the POST until the
receiver had the first and the last of that event's deliveries.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from typing import Any

import redis

from bench.http_load import closed_loop
from bench.plan import Plan
from bench.rig import Rig
from bench.stats import spread

_STOP_WORD = "bench-monitor-stop"


def _watch(rig: Rig, ready: threading.Event, seen: Counter[str]) -> None:
    """MONITOR tells apart what a client sent (a round trip) from what a script ran."""
    client = redis.Redis.from_url(rig.valkey.url, decode_responses=True)
    with client.monitor() as monitor:  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
        ready.set()
        for command in monitor.listen():
            text = command["command"]
            if _STOP_WORD in text:
                break
            if command["client_type"] == "lua":
                seen["inside scripts"] += 1
            else:
                seen[text.split(" ", 1)[0].strip('"').lower()] += 1
    client.close()


async def _command_cost(rig: Rig, event_type: str, events: int) -> dict[str, float]:
    """Per accepted event: commands the API sent (round trips) and those its script ran."""
    request = rig.event_request(event_type)
    seen: Counter[str] = Counter()
    ready = threading.Event()
    # Once unwatched: connections, script loading and queue declarations happen only once.
    await closed_loop(rig.api_port, request, connections=1, count=1)
    # Its passes must not count as the API's commands.
    with rig.scheduler_paused():
        watcher = threading.Thread(target=_watch, args=(rig, ready, seen))
        watcher.start()
        await asyncio.to_thread(ready.wait, 10)
        await closed_loop(rig.api_port, request, connections=1, count=events)
        rig.redis.echo(_STOP_WORD)
        await asyncio.to_thread(watcher.join, 10)
    inside = seen.pop("inside scripts", 0)
    seen.pop("echo", None)
    per_event = {name: n / events for name, n in seen.items()}
    return {"round_trips": sum(per_event.values()), "inside_scripts": inside / events, **per_event}


async def _one_by_one(rig: Rig, event_type: str, width: int, events: int) -> dict[str, Any]:
    request = rig.event_request(event_type)
    ingest, first, last = [], [], []
    # The first event warms the workers' connections: it is sent, waited for and not counted.
    for n in range(events + 1):
        await rig.receiver.reset()
        accepted: list[float] = []

        def stamp(
            _i: int, _status: int, _body: bytes, at: float, into: list[float] = accepted
        ) -> None:
            into.append(at)

        load = await closed_loop(rig.api_port, request, connections=1, count=1, on_reply=stamp)
        stats = await rig.receiver.wait_for(width)
        if n == 0:
            continue
        # From when the POST left: with a wide fan-out the first deliveries can arrive before
        # the 202 does (wake-ups are published before it is written).
        posted = accepted[0] - load.latencies_ms[0] / 1000
        ingest.append(load.latencies_ms[0])
        first.append((stats["first"] - posted) * 1000)
        last.append((stats["last"] - posted) * 1000)
    return {
        "ingest_ms": spread(ingest),
        "first_delivery_ms": spread(first),
        "all_delivered_ms": spread(last),
    }


async def measure(rig: Rig, plan: Plan) -> dict[str, Any]:
    out: dict[str, Any] = {}
    pool = await rig.workers("ours", plan.default_workers)
    for width in plan.fanout_widths:
        rig.reset()
        event_type = f"bench.fanout.{width}"
        await rig.endpoints([f"fan-{width}-{n}" for n in range(width)], event_type)
        await rig.pause(pool)
        cost = await _command_cost(rig, event_type, plan.fanout_events)
        # Those events' wake-ups must not reach the workers.
        rig.purge_queues()
        await rig.resume(pool)
        timing = await _one_by_one(rig, event_type, width, plan.fanout_events)
        out[str(width)] = {"redis_commands_per_event": cost, **timing}
    rig.retire("ours")
    return out
