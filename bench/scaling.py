"""The run behind docs/scaling.md: one API and one worker, then 2 APIs and 4 workers, one Valkey.

Per layout: ingest (202s per second, closed loop, workers stopped, each event to one
endpoint), then delivery (the workers drain that backlog; first arrival to last), and what
each costs: CPU seconds of the API, worker and Valkey processes and Valkey commands (INFO
commandstats, the ones Lua scripts run included) per event and per delivery.

    .venv/bin/python -m bench.scaling [--events 6000] [--out bench/results/scaling.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.http_load import closed_loop
from bench.procs import Child, free_port, process_tree, wait_port
from bench.rig import Rig

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "scaling.json"
# Connections per API process: enough to keep it busy, well under its Redis pool.
CONNECTIONS = 32
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(children: list[Child]) -> float:
    """User + system CPU of these processes and all their descendants so far."""
    total = 0
    for child in children:
        for pid in process_tree(child.pid):
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICKS


def valkey_usage(rig: Rig) -> tuple[float, Counter[str]]:
    cpu = rig.redis.info("cpu")
    stats = rig.redis.info("commandstats")
    calls = Counter(
        {name.removeprefix("cmdstat_"): int(row["calls"]) for name, row in stats.items()}
    )
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]), calls


def used_memory(rig: Rig) -> int:
    return int(rig.redis.info("memory")["used_memory"])


def per(calls: Counter[str], count: int) -> dict[str, float]:
    """Commands per unit, the busiest first; the total under "all"."""
    rows = {name: round(n / count, 2) for name, n in calls.most_common() if n / count >= 0.05}
    return {"all": round(calls.total() / count, 2), **rows}


async def run_layout(
    rig: Rig, apis: list[tuple[Child, int]], workers: int, events: int
) -> dict[str, Any]:
    rig.reset()
    await rig.receiver.reset()
    event_type = f"bench.scale.{len(apis)}x{workers}"
    await rig.endpoints([event_type], event_type)
    api_children = [child for child, _ in apis]
    memory0 = used_memory(rig)
    redis_cpu0, calls0 = valkey_usage(rig)
    api_cpu0 = cpu_seconds(api_children)
    per_api = events // len(apis)
    loads = await asyncio.gather(
        *(
            closed_loop(port, rig.event_request(event_type, port), connections=CONNECTIONS,
                        count=per_api)
            for _, port in apis
        )
    )  # fmt: skip
    accepted = sum(load.statuses[202] for load in loads)
    ingest_seconds = max(load.elapsed_s for load in loads)
    redis_cpu1, calls1 = valkey_usage(rig)
    api_cpu = cpu_seconds(api_children) - api_cpu0

    started = [
        rig.service(f"worker{n}", "worker", WEBHOOK_WORKER_CONCURRENCY="1") for n in range(workers)
    ]
    stats = await rig.receiver.wait_for(accepted)
    span = (stats["last"] or 0.0) - (stats["first"] or 0.0)
    # Let the last records land before reading the counters.
    await asyncio.sleep(1.0)
    redis_cpu2, calls2 = valkey_usage(rig)
    memory = used_memory(rig) - memory0
    worker_cpu = cpu_seconds(started)
    for child in started:
        rig.stop(child.name)
    return {
        "apis": len(apis),
        "workers": workers,
        "events": accepted,
        "ingest_per_s": accepted / ingest_seconds,
        "ingest_p99_ms": max(load.summary()["p99_ms"] for load in loads),
        "delivered": stats["received"],
        "delivery_per_s": (stats["received"] - 1) / span if span > 0 else float("nan"),
        "api_cpu_ms_per_event": 1000 * api_cpu / accepted,
        "worker_cpu_ms_per_delivery": 1000 * worker_cpu / max(1, stats["received"]),
        "redis_cpu_ms_per_event": 1000 * (redis_cpu1 - redis_cpu0) / accepted,
        "redis_cpu_ms_per_delivery": 1000 * (redis_cpu2 - redis_cpu1) / max(1, stats["received"]),
        # The event, its delivery, one attempt record and the indexes, once delivered.
        "redis_bytes_per_delivered_event": memory / accepted,
        "redis_commands_per_event": per(calls1 - calls0, accepted),
        "redis_commands_per_delivery": per(calls2 - calls1, max(1, stats["received"])),
    }


async def measure(events: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        rig = await Rig.start(Path(tmp), log_level="WARNING")
        try:
            port2 = free_port()
            second = rig.service("api2", "api", WEBHOOK_PORT=str(port2))
            wait_port(second, port2)
            first = (rig.children["api"], rig.api_port)
            layouts = [
                await run_layout(rig, [first], 1, events),
                await run_layout(rig, [first, (second, port2)], 4, events),
            ]
        finally:
            await rig.close()
    return {
        "date": time.strftime("%Y-%m-%d"),
        "cpus": os.cpu_count(),
        # Other work on the machine during the run, as the figures' context.
        "load_average_after": os.getloadavg(),
        "layouts": layouts,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=6000)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    report = json.dumps(asyncio.run(measure(args.events)), indent=2) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report)
    print(report)
