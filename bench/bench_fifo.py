"""A FIFO endpoint's throughput against a normal one (issue 18), same receiver, same worker.

    python -m bench.bench_fifo [--events 2000] [--rounds 3]

About a minute. Each round loads a backlog of ``--events`` events for one endpoint while
the worker does not consume (through the API, 32 connections), then lets the worker at it
and times the receiver from the first verified arrival to the last (bench/delivery.py
drain); the FIFO endpoint and the normal one take turns at going first. The rig is the
delivery benchmark's (bench/rig.py: Valkey with AOF, the API, the scheduler, one worker of
two processes, bench/receiver.py answering 200 at once on loopback), so the ratio is the
cost of one request in flight against WEBHOOK_ENDPOINT_CONCURRENCY (10) of them.

Writes ``bench/results/fifo.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any

import orjson

from bench.delivery import drain
from bench.http_load import closed_loop
from bench.rig import Rig
from bench.run import RESULTS, machine

EVENT_TYPE = "bench.fifo"
WORKER_PROCESSES = 2
_LOAD_CONNECTIONS = 32


async def one_run(rig: Rig, ordering: str | None, events: int) -> dict[str, Any]:
    pool = await rig.workers("ours", WORKER_PROCESSES)
    await rig.pause(pool)
    rig.reset()
    await rig.receiver.reset()
    name = f"fifo-{ordering or 'none'}"
    body = {"url": rig.receiver.url(name), "event_types": [EVENT_TYPE], "ordering": ordering}
    created = await rig.api("POST", "/v1/endpoints", body)
    await rig.receiver.set_secrets({name: created["secret"]})
    loaded = await closed_loop(
        rig.api_port, rig.event_request(EVENT_TYPE), connections=_LOAD_CONNECTIONS, count=events
    )
    return await drain(rig, pool, loaded.statuses[202])


async def measure(events: int, rounds: int) -> dict[str, Any]:
    directory = Path(tempfile.mkdtemp(prefix="bench-fifo-"))
    rig = await Rig.start(directory, log_level="WARNING")
    runs: dict[str, list[dict[str, Any]]] = {"fifo": [], "none": []}
    try:
        for n in range(rounds):
            turns = ["fifo", "none"] if n % 2 == 0 else ["none", "fifo"]
            for side in turns:
                run = await one_run(rig, "fifo" if side == "fifo" else None, events)
                if run["delivered"] != run["expected"] or run["rejected"]:
                    raise RuntimeError(f"{side}: {run}")
                runs[side].append(run)
    finally:
        await rig.close()
        shutil.rmtree(directory, ignore_errors=True)
    figures = ("rate", "worker_cpu_ms", "valkey_cpu_ms")
    medians = {
        side: {f: statistics.median(r[f] for r in rs) for f in figures} for side, rs in runs.items()
    }
    return {
        "machine": machine(),
        "events": events,
        "rounds": rounds,
        "median": medians,
        "ratio_fifo_to_none": {f: medians["fifo"][f] / medians["none"][f] for f in figures},
        "runs": runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    result = asyncio.run(measure(args.events, args.rounds))
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "fifo.json").write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
    m, ratio = result["median"], result["ratio_fifo_to_none"]
    print(f"{'':>22} {'fifo':>10} {'none':>10} {'fifo/none':>10}")
    for figure, unit in (("rate", "/s"), ("worker_cpu_ms", " ms"), ("valkey_cpu_ms", " ms")):
        print(
            f"{figure + unit:>22} {m['fifo'][figure]:>10.3f} {m['none'][figure]:>10.3f} "
            f"{ratio[figure]:>9.2f}x"
        )


if __name__ == "__main__":
    main()
