"""Ingest under an open-loop load: latency at fixed rates, and the highest rate sustained.

The same two measurements run against the real API (workers stopped, each event fanning
out to ``plan.fanout`` endpoints) and against the ingest floor, so the two compare as a
ratio taken minutes apart on the same machine.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from bench.http_load import LoadResult, RequestFactory, closed_loop, open_loop
from bench.plan import Plan
from bench.procs import Child
from bench.rig import Rig
from bench.stats import spread

P99_LIMIT_MS = 50.0
CLIMB = 1.5
# Far above what one Python process can take on this machine; stops a runaway climb.
MAX_RATE = 40_000.0
# Below this the service is not worth searching further: the figure reads as 0.
MIN_RATE = 50.0

Prepare = Callable[[], Awaitable[None]]


async def _load(port: int, request: RequestFactory, rate: float, plan: Plan) -> LoadResult:
    # Past the run, wait only a little for answers: an overloaded server's backlog would
    # otherwise take longer to drain than the run itself, and counts as errors anyway.
    return await open_loop(port, request, rate, plan.load_seconds, drain_timeout=3.0)


def sustained(summary: dict[str, float]) -> bool:
    return summary["errors"] == 0 and summary["p99_ms"] < P99_LIMIT_MS


async def fixed_rates(
    rig: Rig, server: Child, port: int, request: RequestFactory, plan: Plan, prepare: Prepare
) -> dict[str, Any]:
    """Each rate, ``plan.repeats`` times: p50, p99, max latency and errors, and the CPU the
    server and Valkey spent per answered request (steadier than latency under outside load)."""
    out: dict[str, Any] = {}
    for rate in plan.ingest_rates:
        runs = []
        for _ in range(plan.repeats):
            await prepare()
            cpu, valkey_cpu = server.cpu_seconds(), rig.valkey_cpu()
            summary = (await _load(port, request, rate, plan)).summary()
            answered = max(1.0, summary["completed"])
            summary["server_cpu_ms"] = 1000 * (server.cpu_seconds() - cpu) / answered
            summary["valkey_cpu_ms"] = 1000 * (rig.valkey_cpu() - valkey_cpu) / answered
            runs.append(summary)
        figures = ("p50_ms", "p99_ms", "max_ms", "errors", "server_cpu_ms", "valkey_cpu_ms")
        out[str(rate)] = {key: spread([r[key] for r in runs]) for key in figures}
    return out


async def highest_sustained(
    port: int, request: RequestFactory, plan: Plan, prepare: Prepare, start: float
) -> dict[str, Any]:
    """The search below, ``plan.searches`` times."""
    found = [await _search(port, request, plan, prepare, start) for _ in range(plan.searches)]
    return {"rate": spread([f["rate"] for f in found]), "searches": found}


async def _search(
    port: int, request: RequestFactory, plan: Plan, prepare: Prepare, start: float
) -> dict[str, Any]:
    """Climb from ``start`` by x1.5 until p99 reaches 50 ms or a request fails, then bisect."""
    trials: list[dict[str, float]] = []

    async def holds(rate: float) -> bool:
        await prepare()
        summary = (await _load(port, request, rate, plan)).summary()
        trials.append({"rate": rate, **summary})
        return sustained(summary)

    if await holds(start):
        good, bad = start, start * CLIMB
        while bad < MAX_RATE and await holds(bad):
            good, bad = bad, bad * CLIMB
    else:
        # Not even the start held: step down until a rate does.
        good, bad = start / CLIMB, start
        while good >= MIN_RATE and not await holds(good):
            good, bad = good / CLIMB, good
        if good < MIN_RATE:
            good = 0.0
    for _ in range(plan.bisections):
        middle = (good + bad) / 2
        if await holds(middle):
            good = middle
        else:
            bad = middle
    return {"rate": round(good), "trials": trials}


def best_fixed(fixed: dict[str, Any]) -> float:
    """The highest fixed rate whose median run held: where the search can start."""
    held = [
        float(rate)
        for rate, figures in fixed.items()
        if figures["errors"]["median"] == 0 and figures["p99_ms"]["median"] < P99_LIMIT_MS
    ]
    return max(held, default=250.0)


async def measure(rig: Rig, plan: Plan) -> dict[str, Any]:
    """The real API, workers stopped: fixed rates, then the highest sustained rate."""
    rig.retire("ours")  # workers stopped: only the API's own cost is measured
    event_type = "bench.ingest"
    names = [f"ingest-{n}" for n in range(plan.fanout)]

    async def prepare() -> None:
        rig.reset()
        await rig.endpoints(names, event_type)

    request = rig.event_request(event_type)
    await prepare()
    # Warm up: scripts loaded, the Celery connection open, the executor thread started.
    await closed_loop(rig.api_port, request, connections=8, count=300)
    fixed = await fixed_rates(rig, rig.children["api"], rig.api_port, request, plan, prepare)
    search = await highest_sustained(rig.api_port, request, plan, prepare, best_fixed(fixed))
    rss = rig.children["api"].rss_bytes()
    rig.reset()
    return {"fixed": fixed, "sustained": search, "api_rss": rss}
