"""Run the end-to-end benchmarks: ``python -m bench.run [--plan quick|full] [--profile]``.

Starts Valkey (AOF on), the API, the scheduler and a verifying receiver, measures the
floors, ingest, delivery against the naive baseline, latency, footprint and scaling, stops
everything, prints the table and writes ``bench/results/<plan>.json`` and ``<plan>.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import shutil
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import uvloop

from bench import delivery, fanout, floors, footprint, ingest, latency, profile
from bench.plan import PLANS, Plan
from bench.report import markdown_table, rows, text_table
from bench.rig import Rig

RESULTS = Path("bench/results")
Phase = Callable[[Rig, Plan], Awaitable[dict[str, Any]]]
PHASES: dict[str, Phase] = {
    "floors": floors.measure,
    "ingest": ingest.measure,
    "delivery": delivery.measure,
    "latency": latency.measure,
    "footprint": footprint.measure,
    "fanout": fanout.measure,
}


def machine() -> dict[str, Any]:
    model = ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "memory_gib": round(pages / 2**30, 1),
        "python": platform.python_version(),
        "kernel": platform.release(),
        "commit": commit,
        "tree_dirty": bool(
            subprocess.run(
                ["git", "status", "--porcelain"], capture_output=True, text=True, check=False
            ).stdout.strip()
        ),
    }


@contextlib.contextmanager
def scratch(prefix: str, keep: bool) -> Iterator[Path]:
    """A bench's temp directory for its processes' logs and data: removed after, unless
    ``keep`` (--keep), when its path is printed instead."""
    directory = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield directory
    finally:
        if keep:
            print(f"logs and data kept in {directory}")
        else:
            shutil.rmtree(directory, ignore_errors=True)


def save_json(stem: str, result: dict[str, Any]) -> Path:
    """``result`` as bench/results/<stem>.json; returns the path."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{stem}.json"
    path.write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
    return path


# A bench at several endpoint counts: measure(directory, counts, deliveries, rounds).
WidthsMeasure = Callable[[Path, list[int], int, int], Coroutine[Any, Any, dict[str, Any]]]


def widths_parser(doc: str, deliveries: int) -> argparse.ArgumentParser:
    """The arguments of a bench run at several endpoint counts, ``run_widths``'s."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--deliveries", type=int, default=deliveries)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--endpoints", default="1,10", help="comma list of endpoint counts")
    parser.add_argument("--keep", action="store_true", help="keep the processes' logs and data")
    return parser


def run_widths(
    stem: str, args: argparse.Namespace, measure: WidthsMeasure, **about: Any
) -> tuple[dict[str, Any], Path]:
    """``measure`` under uvloop in a scratch directory, its result with the machine, the
    arguments, ``about`` and the time taken; saved as bench/results/<stem>.json."""
    counts = [int(n) for n in args.endpoints.split(",")]
    started = time.monotonic()
    with scratch(f"whs-bench-{stem}-", args.keep) as directory:
        by_endpoints = uvloop.run(measure(directory, counts, args.deliveries, args.rounds))
    result = {
        "machine": machine(),
        "deliveries": args.deliveries,
        "rounds": args.rounds,
        **about,
        "by_endpoints": by_endpoints,
        "seconds": round(time.monotonic() - started, 1),
    }
    return result, save_json(stem, result)


async def _run(plan: Plan, phases: Sequence[str], profiling: bool, keep: bool) -> dict[str, Any]:
    with scratch("whs-bench-", keep) as directory:
        return await _run_in(plan, phases, profiling, directory)


async def _run_in(
    plan: Plan, phases: Sequence[str], profiling: bool, directory: Path
) -> dict[str, Any]:
    started = time.monotonic()
    result: dict[str, Any] = {
        "plan": plan.name,
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "load_before": os.getloadavg(),
    }
    rig = await Rig.start(directory, log_level="INFO")
    try:
        result["valkey"] = rig.redis.info("server").get("valkey_version", "?")
        if profiling:
            result["profile"] = await profile.run(rig, plan, RESULTS)
        else:
            for name in phases:
                print(f"[{time.monotonic() - started:6.1f}s] {name} …", flush=True)
                result[name] = await PHASES[name](rig, plan)
    finally:
        await rig.close()
    result["load_after"] = os.getloadavg()
    result["seconds"] = round(time.monotonic() - started, 1)
    return result


def _write_table(result: dict[str, Any], markdown: Path) -> None:
    table = rows(result)
    print(text_table(table))
    markdown.write_text(markdown_table(table) + "\n")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", choices=sorted(PLANS), default="quick")
    parser.add_argument(
        "--only", default=",".join(PHASES), help=f"comma list of {', '.join(PHASES)}"
    )
    parser.add_argument(
        "--profile", action="store_true", help="only sample the API and a worker with py-spy"
    )
    parser.add_argument("--keep", action="store_true", help="keep the processes' logs and data")
    parser.add_argument(
        "--table", type=Path, help="only print the table of an earlier run's JSON, and its .md"
    )
    args = parser.parse_args(argv)
    if args.table is not None:
        _write_table(orjson.loads(args.table.read_bytes()), args.table.with_suffix(".md"))
        return
    phases = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = set(phases) - set(PHASES)
    if unknown:
        parser.error(f"unknown phases: {', '.join(sorted(unknown))}")
    plan = PLANS[args.plan]
    result = uvloop.run(_run(plan, phases, args.profile, args.keep))
    saved = save_json("profile" if args.profile else plan.name, result)
    if args.profile:
        print(orjson.dumps(result["profile"], option=orjson.OPT_INDENT_2).decode())
    else:
        _write_table(result, RESULTS / f"{plan.name}.md")
    print(f"\n{result['seconds']} s; results in {saved}")


if __name__ == "__main__":
    main()
