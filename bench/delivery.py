"""Delivery throughput: ours against the naive baseline, same Redis, same receiver.

A run loads a backlog while the workers do not consume (ours through the API, the naive
one as one Celery task per delivery), lets the workers at it and times the receiver from
the first verified arrival to the last; every delivery is counted.
Each event goes to every one of the run's endpoints, so ``deliveries = events x endpoints``.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import Any

from bench.http_load import closed_loop
from bench.naive.publish import publish
from bench.plan import Plan
from bench.procs import Child
from bench.rig import Rig, Workers
from bench.stats import spread

# Connections the backlog is loaded through: well under the API's Redis pool.
_LOAD_CONNECTIONS = 32


async def drain(rig: Rig, pool: Workers, expected: int) -> dict[str, Any]:
    # CPU per delivery holds up far better than deliveries/s on a machine others load too.
    cpu, valkey_cpu = pool.child.cpu_seconds(), rig.valkey_cpu()
    await rig.resume(pool)
    stats = await rig.receiver.wait_for(expected)
    cpu, valkey_cpu = pool.child.cpu_seconds() - cpu, rig.valkey_cpu() - valkey_cpu
    span = (stats["last"] or 0.0) - (stats["first"] or 0.0)
    done = max(1, stats["received"])
    return {
        "rate": (stats["received"] - 1) / span if span > 0 else math.nan,
        "worker_cpu_ms": 1000 * cpu / done,
        "valkey_cpu_ms": 1000 * valkey_cpu / done,
        "delivered": stats["received"],
        "expected": expected,
        "rejected": stats["rejected"],
        "rss": pool.child.rss_bytes(),
    }


async def ours(
    rig: Rig,
    endpoints: int,
    deliveries: int,
    workers: int,
    watch: Callable[[Child], object] | None = None,
) -> dict[str, Any]:
    """``watch`` sees the worker just before it starts on the backlog (a profiler attaches)."""
    pool = await rig.workers("ours", workers)
    await rig.pause(pool)
    rig.reset()
    await rig.receiver.reset()
    event_type = f"bench.deliver.{endpoints}"
    await rig.endpoints([f"ours-{endpoints}-{n}" for n in range(endpoints)], event_type)
    events = max(1, deliveries // endpoints)
    request = rig.event_request(event_type)
    # The backlog's ingest, measured on its way: the API's CPU and Valkey's per event (the
    # scheduler and its shipper running beside them, as in production).
    api = rig.children["api"]
    api_cpu, valkey_cpu = api.cpu_seconds(), rig.valkey_cpu()
    loaded = await closed_loop(rig.api_port, request, connections=_LOAD_CONNECTIONS, count=events)
    accepted = max(1, loaded.statuses[202])
    ingest = {
        "ingest_api_cpu_ms": 1000 * (api.cpu_seconds() - api_cpu) / accepted,
        "ingest_valkey_cpu_ms": 1000 * (rig.valkey_cpu() - valkey_cpu) / accepted,
    }
    if watch is not None:
        watch(pool.child)
    return {**await drain(rig, pool, loaded.statuses[202] * endpoints), **ingest}


async def naive(rig: Rig, endpoints: int, deliveries: int, workers: int) -> dict[str, Any]:
    pool = await rig.workers("naive", workers)
    await rig.pause(pool)
    rig.reset()
    await rig.receiver.reset()
    targets = await rig.naive_targets([f"naive-{endpoints}-{n}" for n in range(endpoints)])
    events = max(1, deliveries // endpoints)
    await asyncio.to_thread(publish, targets, events)
    return await drain(rig, pool, events * endpoints)


async def _compare(rig: Rig, plan: Plan, endpoints: int, workers: int) -> dict[str, Any]:
    """Ours and naive interleaved, so drift in the machine's load hits both alike."""
    runs: dict[str, list[dict[str, Any]]] = {"ours": [], "naive": []}
    for _ in range(plan.repeats):
        runs["ours"].append(await ours(rig, endpoints, plan.deliveries, workers))
        runs["naive"].append(await naive(rig, endpoints, plan.deliveries, workers))
    figures = ("rate", "worker_cpu_ms", "valkey_cpu_ms")
    return {
        side: {**{f: spread([r[f] for r in rs]) for f in figures}, "runs": rs}
        for side, rs in runs.items()
    }


async def measure(rig: Rig, plan: Plan) -> dict[str, Any]:
    by_endpoints = {
        str(n): await _compare(rig, plan, n, plan.default_workers) for n in plan.endpoint_counts
    }
    middle = plan.endpoint_counts[len(plan.endpoint_counts) // 2]
    by_workers = {
        # The default worker count at this width was just measured above.
        str(w): by_endpoints[str(middle)]
        if w == plan.default_workers
        else await _compare(rig, plan, middle, w)
        for w in plan.worker_counts
    }
    rig.retire("ours")
    rig.retire("naive")
    return {"by_endpoints": by_endpoints, "by_workers": {"endpoints": middle, **by_workers}}
