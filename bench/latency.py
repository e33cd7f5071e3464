"""202 → the receiver got it, at a steady rate, with the workers already running.

Ours: each event's 202 is stamped by the load generator, each arrival by the receiver (both
wall clock, same machine); every delivery's latency is its arrival minus its event's 202.
Naive: the same from the moment its tasks were published. The run also yields the
processes' resident memory (what Redis holds is bench/footprint.py's).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import Any

import orjson

from bench.http_load import closed_loop, open_loop
from bench.naive.publish import publish, publish_paced
from bench.plan import Plan
from bench.rig import Rig
from bench.stats import percentile, spread


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
    return {
        **_summary(_latencies(accepted, arrivals), expected),
        "ingest_errors": load.errors,
        "rss": {**pool.child.rss_bytes(), **rig.children["api"].rss_bytes()},
    }


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
    out["runs"] = runs
    return out
