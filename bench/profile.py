"""Where the time goes: py-spy samples the API under ingest load and a worker delivering.

``python -m bench.run --profile`` runs only this: one ingest load at 1 000 ev/s with the
API sampled, then two delivery backlogs (10 endpoints, then 1) with the worker and its
prefork children sampled. The raw collapsed stacks land in ``bench/results/profile-*.txt``
(feed them to any flame graph tool); the summary gives, per process, the functions that
hold the CPU themselves and the share of samples under each of our functions and under
each package.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

from bench import delivery
from bench.http_load import closed_loop, open_loop
from bench.plan import Plan
from bench.procs import Child
from bench.rig import Rig

PY_SPY = Path(sys.executable).parent / "py-spy"
_RATE = 250  # samples/s: enough detail, little drag on a 2-core machine
_TOP = 20
# Our own packages: the summary follows their functions inclusively.
_OURS = frozenset({"webhook_service", "workers", "signer"})


def record(child: Child, seconds: float, out: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            str(PY_SPY), "record", "--pid", str(child.pid), "--duration", str(int(seconds)),
            "--rate", str(_RATE), "--format", "raw", "--output", str(out), "--subprocesses",
            "--nonblocking",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip


def _function(frame: str) -> str:
    """'name (pkg/file.py:123)' -> 'name (pkg/file.py)': lines of one function add up."""
    return frame.rsplit(":", 1)[0] + ")"


def _package(frame: str) -> str:
    return frame[frame.rfind("(") + 1 :].split("/", 1)[0].split(":", 1)[0]


def summarize(raw: Path) -> dict[str, Any]:
    """Per sampled process: its samples, the functions holding the CPU themselves, the share
    of samples under each of our functions (inclusive) and under each package."""
    own: dict[str, Counter[str]] = {}
    ours: dict[str, Counter[str]] = {}
    packages: dict[str, Counter[str]] = {}
    totals: Counter[str] = Counter()
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        frames = stack.split(";")
        procs = [f.split(":", 1)[0] for f in frames if f.startswith("process ")]
        process = procs[-1] if procs else "process ?"
        code = [f for f in frames if not f.startswith(("process ", "thread "))]
        if not code:
            continue
        totals[process] += count
        own.setdefault(process, Counter())[_function(code[-1])] += count
        mine = {_function(f) for f in code if _package(f) in _OURS}
        ours.setdefault(process, Counter()).update(dict.fromkeys(mine, count))
        packages.setdefault(process, Counter()).update(
            dict.fromkeys({_package(f) for f in code}, count)
        )

    def shares(counter: Counter[str], total: int) -> list[tuple[str, float]]:
        return [(name, round(100 * n / total, 1)) for name, n in counter.most_common(_TOP)]

    return {
        process: {
            "samples": total,
            "self": shares(own[process], total),
            "ours_inclusive": shares(ours[process], total),
            "packages": shares(packages[process], total),
        }
        for process, total in totals.most_common()
    }


def _attach(spies: list[subprocess.Popen[bytes]], raw: Path, worker: Child) -> None:
    spies.append(record(worker, 60, raw))


async def run(rig: Rig, plan: Plan, out_dir: Path) -> dict[str, Any]:
    await asyncio.to_thread(out_dir.mkdir, parents=True, exist_ok=True)
    rig.reset()
    event_type = "bench.profile"
    await rig.endpoints([f"prof-{n}" for n in range(plan.fanout)], event_type)
    request = rig.event_request(event_type)
    await closed_loop(rig.api_port, request, connections=8, count=300)
    api_raw = out_dir / "profile-api.txt"
    seconds = max(5.0, plan.load_seconds)
    spy = record(rig.children["api"], seconds, api_raw)
    await open_loop(rig.api_port, request, 1000, seconds)
    await asyncio.to_thread(spy.wait)

    out: dict[str, Any] = {"api": summarize(api_raw) if api_raw.exists() else None}
    # Ten deliveries per wake-up, then one: the batch amortises what each Celery message costs.
    for endpoints, deliveries in ((10, 8000), (1, 2000)):
        raw = out_dir / f"profile-worker-{endpoints}.txt"
        spies: list[subprocess.Popen[bytes]] = []
        result = await delivery.ours(
            rig,
            endpoints,
            deliveries,
            plan.default_workers,
            watch=partial(_attach, spies, raw),
        )
        for spy in spies:
            # The worker stays up: SIGINT makes py-spy stop and write what it has.
            spy.send_signal(signal.SIGINT)
            await asyncio.to_thread(spy.wait)
        out[f"worker_{endpoints}"] = {
            "delivery": result,
            "profile": summarize(raw) if raw.exists() else None,
        }
    rig.retire("ours")
    return out
