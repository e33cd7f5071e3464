"""202 → the receiver got it, at a steady rate, with the workers already running.

Ours: each event's 202 is stamped by the load generator, each arrival by the receiver (both
wall clock, same machine); every delivery's latency is its arrival minus its event's 202.
Naive: the same from the moment its tasks were published. The run also yields the
footprint: Redis bytes per accepted event (its deliveries and attempts, payload excluded)
and the processes' resident memory.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import Any, cast

import orjson

from bench.http_load import closed_loop, open_loop
from bench.naive.publish import publish, publish_paced
from bench.plan import Plan
from bench.rig import Rig
from bench.stats import percentile, spread
from webhook_service.ids import event_deliveries
from webhook_service.store import keys

# Events whose keys are weighed one by one for the breakdown of the footprint.
_SAMPLED_EVENTS = 20


def _latencies(accepted: dict[str, float], arrivals: list[tuple[str, str, float]]) -> list[float]:
    return [(t - accepted[wid]) * 1000 for _, wid, t in arrivals if wid in accepted]


def _summary(latencies: list[float], expected: int) -> dict[str, float]:
    return {
        "p50_ms": percentile(latencies, 50),
        "p99_ms": percentile(latencies, 99),
        "max_ms": max(latencies, default=math.nan),
        "missing": expected - len(latencies),
    }


async def _warm(rig: Rig, expected: int, send: Callable[[], Any]) -> None:
    """One event through the freshly started workers, so start-up is not measured."""
    await send()
    await rig.receiver.wait_for(expected, stall=30.0)
    await rig.receiver.reset()


def _memory(rig: Rig) -> int:
    used: int = rig.redis.info("memory")["used_memory"]
    return used


def _usage(rig: Rig, key: str) -> int:
    return int(rig.redis.memory_usage(key) or 0)


def _key_bytes(rig: Rig, event_ids: list[str]) -> dict[str, float]:
    """MEMORY USAGE of one event's own keys, averaged; the body's length is taken off.
    A delivery's hash holds its attempts (keys.py); attempt_lists weighs the overflow lists
    of those too long for it, which most deliveries do not have (0 then)."""
    event_bytes, delivery_bytes, attempt_bytes, body_bytes = [], [], [], []
    for event_id in event_ids[:_SAMPLED_EVENTS]:
        event = cast(dict[str, str], rig.redis.hgetall(keys.event(event_id)))
        event_bytes.append(_usage(rig, keys.event(event_id)))
        body_bytes.append(len(event.get("body", "").encode()))
        deliveries = event_deliveries(event_id, event.get("dlvs"))
        delivery_bytes.append(
            sum(rig.redis.memory_usage(keys.delivery(d)) or 0 for d in deliveries)
        )
        attempt_bytes.append(sum(_usage(rig, keys.attempts(d)) for d in deliveries))

    def mean(values: list[int]) -> float:
        return sum(values) / len(values) if values else math.nan

    return {
        "event_hash": mean(event_bytes) - mean(body_bytes),
        "delivery_hashes": mean(delivery_bytes),
        "attempt_lists": mean(attempt_bytes),
        "payload": mean(body_bytes),
    }


async def ours(rig: Rig, plan: Plan) -> dict[str, Any]:
    rig.reset()
    await rig.receiver.reset()
    event_type = "bench.latency"
    await rig.endpoints([f"lat-{n}" for n in range(plan.fanout)], event_type)
    pool = await rig.workers("ours", plan.default_workers)
    request = rig.event_request(event_type)
    await _warm(
        rig, plan.fanout, lambda: closed_loop(rig.api_port, request, connections=1, count=1)
    )
    before = _memory(rig)
    accepted: dict[str, float] = {}

    def on_reply(_index: int, status: int, body: bytes, at: float) -> None:
        if status == 202:
            accepted[orjson.loads(body)["id"]] = at

    load = await open_loop(
        rig.api_port, request, plan.latency_rate, plan.latency_seconds, on_reply=on_reply
    )
    expected = len(accepted) * plan.fanout
    await rig.receiver.wait_for(expected)
    arrivals = await rig.receiver.arrivals()
    # Let the last attempts' records land before weighing.
    await asyncio.sleep(0.5)
    grown = _memory(rig) - before
    parts = _key_bytes(rig, list(accepted))
    result = {
        **_summary(_latencies(accepted, arrivals), expected),
        "ingest_errors": load.errors,
        "bytes_per_event": grown / max(1, len(accepted)) - parts["payload"],
        "key_bytes": parts,
        "rss": {**pool.child.rss_bytes(), **rig.children["api"].rss_bytes()},
    }
    return result


async def naive(rig: Rig, plan: Plan) -> dict[str, Any]:
    rig.reset()
    await rig.receiver.reset()
    targets = await rig.naive_targets([f"naive-lat-{n}" for n in range(plan.fanout)])
    pool = await rig.workers("naive", plan.default_workers)
    await _warm(rig, plan.fanout, lambda: asyncio.to_thread(publish, targets, 1))
    published = await asyncio.to_thread(
        publish_paced, targets, plan.latency_rate, plan.latency_seconds
    )
    expected = len(published) * plan.fanout
    await rig.receiver.wait_for(expected)
    arrivals = await rig.receiver.arrivals()
    return {**_summary(_latencies(published, arrivals), expected), "rss": pool.child.rss_bytes()}


async def measure(rig: Rig, plan: Plan) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {"ours": [], "naive": []}
    for _ in range(plan.repeats):
        runs["ours"].append(await ours(rig, plan))
        runs["naive"].append(await naive(rig, plan))
    rig.retire("naive")
    figures = ("p50_ms", "p99_ms", "max_ms")
    out: dict[str, Any] = {
        side: {f: spread([r[f] for r in rs]) for f in figures} for side, rs in runs.items()
    }
    out["bytes_per_event"] = spread([r["bytes_per_event"] for r in runs["ours"]])
    out["runs"] = runs
    return out
