"""uvloop against the standard library's event loop, in the API and the workers, in one run
(WEBHOOK_EVENT_LOOP, issue 21).

    python -m bench.bench_event_loop [--rounds 3] [--events 3000] [--rate 300] [--keep]

Each round runs the whole service twice from nothing, once on each loop, the order swapped
every other round: one Valkey with AOF, the API, one worker of 2 prefork processes and the
scheduler (its shipper) as real processes (bench/rig.py), three endpoints at the bench's
verifying receiver, so every event is three deliveries. ``--events`` events go out in an
open loop at ``--rate`` while the worker delivers. Measured from just before the first
event until the last delivery arrived: the API's CPU per answered event, the worker's CPU
(its prefork processes included) per delivery, and the 202's p50 and p99. Prints uvloop's
figure over the standard loop's for each, per round; writes
``bench/results/event_loop.json``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import uvloop

from bench.http_load import open_loop
from bench.rig import Rig
from bench.run import machine, save_json, scratch

LOOPS = ("asyncio", "uvloop")
TYPE = "bench.loop"
ENDPOINTS = 3


async def _measure(loop: str, args: argparse.Namespace, directory: Path) -> dict[str, Any]:
    rig = await Rig.start(directory, log_level="WARNING", settings={"WEBHOOK_EVENT_LOOP": loop})
    try:
        pool = await rig.workers("ours", 2)
        await rig.endpoints([f"{loop}-{n}" for n in range(ENDPOINTS)], TYPE)
        api = rig.children["api"]
        api_before, worker_before = api.cpu_seconds(), pool.child.cpu_seconds()
        began = time.perf_counter()
        load = await open_loop(
            rig.api_port, rig.event_request(TYPE), args.rate, args.events / args.rate
        )
        accepted = load.statuses.get(202, 0)
        stats = await rig.receiver.wait_for(accepted * ENDPOINTS)
        elapsed = time.perf_counter() - began
        api_cpu = api.cpu_seconds() - api_before
        worker_cpu = pool.child.cpu_seconds() - worker_before
    finally:
        await rig.close()
    delivered = int(stats["received"])
    summary = load.summary()
    return {
        "loop": loop,
        "accepted": accepted,
        "answers": {str(code): n for code, n in sorted(load.statuses.items())},
        "delivered": delivered,
        "rejected_signatures": stats["rejected"],
        "seconds": round(elapsed, 2),
        "api_ms_per_event": 1000 * api_cpu / max(1, accepted),
        "worker_ms_per_delivery": 1000 * worker_cpu / max(1, delivered),
        "p50_ms": summary["p50_ms"],
        "p99_ms": summary["p99_ms"],
    }


FIGURES = {
    "api_ms_per_event": "API CPU per event",
    "worker_ms_per_delivery": "worker CPU per delivery",
    "p50_ms": "202 p50",
    "p99_ms": "202 p99",
}


def report(runs: list[dict[str, Any]]) -> str:
    """A line per figure: each loop's value per round, and uvloop over asyncio (below 1:
    uvloop costs less), with the median ratio."""
    by_round: dict[int, dict[str, dict[str, Any]]] = {}
    for run in runs:
        by_round.setdefault(run["round"], {})[run["loop"]] = run
    lines = ["| figure | asyncio | uvloop | uvloop / asyncio |", "|---|---:|---:|---:|"]
    for key, label in FIGURES.items():
        pairs = [(r["asyncio"][key], r["uvloop"][key]) for r in by_round.values()]
        ratios = [new / old for old, new in pairs if old]
        lines.append(
            f"| {label} (ms) | {', '.join(f'{old:.3f}' for old, _ in pairs)}"
            f" | {', '.join(f'{new:.3f}' for _, new in pairs)}"
            f" | {', '.join(f'{r:.2f}x' for r in ratios)}"
            f" (median {statistics.median(ratios):.2f}x) |"
        )
    return "\n".join(lines)


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    for round_ in range(args.rounds):
        order = LOOPS if round_ % 2 == 0 else LOOPS[::-1]
        for loop in order:
            with scratch(f"whs-bench-loop-{loop}-", args.keep) as directory:
                run = {"round": round_, **await _measure(loop, args, directory)}
            print(run, flush=True)
            runs.append(run)
    return {"machine": machine(), "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--rate", type=float, default=300.0)
    parser.add_argument("--keep", action="store_true", help="keep each run's directory")
    args = parser.parse_args()
    result = uvloop.run(_run(args))
    save_json("event_loop", result)
    print(report(result["runs"]))


if __name__ == "__main__":
    main()
