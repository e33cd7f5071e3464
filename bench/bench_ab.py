"""Delivery and its ingest against an earlier commit of this repository: ``python -m bench.bench_ab
[--base REF] [--deliveries N] [--rounds R] [--endpoints 1,10] [--keep]``.

How each change of issue 21's later passes was measured before it was kept. The base is the
tree of REF (default ``HEAD~1``, unpacked by bench/release_tree.py), its SQL log migrated by
its own code; each round starts a rig on each tree in turn
(bench/rig.py: Valkey with AOF, the API, the scheduler and its shipper, the verifying
receiver; the base first in even rounds) and drains a backlog at each endpoint count with
2 worker processes (bench/delivery.py ``ours``; the API's and Valkey's CPU per event are
read while that backlog is ingested, the fan-out the endpoint count). Besides the medians
it prints, per figure, the median of each round's this ÷ base: on a shared machine that
drifts between rounds by more than a change moves a figure, the pair of one round is what
compares. Results go to bench/results/ab.json and .md.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Literal

from bench import release_tree
from bench.delivery import ours
from bench.report import CPU, Row, markdown_table, text_table
from bench.rig import Rig
from bench.run import RESULTS, run_widths, widths_parser
from bench.stats import spread

WORKERS = 2
Better = Literal["higher", "lower"]
FIGURES: dict[str, tuple[str, str, Better]] = {
    "rate": ("deliveries/s", "/s", "higher"),
    "worker_cpu_ms": ("worker CPU per delivery", CPU, "lower"),
    "valkey_cpu_ms": ("Valkey CPU per delivery", CPU, "lower"),
    "ingest_api_cpu_ms": ("API CPU per event ingested", CPU, "lower"),
    "ingest_valkey_cpu_ms": ("Valkey CPU per event ingested", CPU, "lower"),
}
SIDES = ("base", "this")


# The base's SQL log made by the base's own migrations, as its `up` would.
_MIGRATE = (
    "import sys; from pathlib import Path; from bench.rig import _migrate_log; "
    "_migrate_log(Path(sys.argv[1]))"
)


def _migrate_with(tree: Path, data: Path) -> None:
    data.mkdir(parents=True)
    subprocess.run(
        [sys.executable, "-c", _MIGRATE, str(data)],
        cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)}, check=True,
    )  # fmt: skip


async def measure_pair(
    directory: Path, counts: list[int], deliveries: int, rounds: int, base: Path
) -> dict[str, Any]:
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {
        str(n): {side: [] for side in SIDES} for n in counts
    }
    for number in range(rounds):
        for side in SIDES if number % 2 == 0 else SIDES[::-1]:
            data = directory / f"{side}-{number}"
            tree = base if side == "base" else None
            if tree is not None:
                await asyncio.to_thread(_migrate_with, tree, data / "data")
            rig = await Rig.start(data, log_level="INFO", tree=tree)
            try:
                for n in counts:
                    runs[str(n)][side].append(await ours(rig, n, deliveries, WORKERS))
            finally:
                await rig.close()
    return runs


def table(by_endpoints: dict[str, Any], ref: str) -> tuple[list[Row], list[str]]:
    rows, paired = [], []
    for endpoints, sides in by_endpoints.items():
        for figure, (name, unit, better) in FIGURES.items():
            this, base = ([r[figure] for r in sides[s]] for s in ("this", "base"))
            rows.append(
                Row("ab", f"{name}, {endpoints} endpoint(s)", spread(this), unit, better,
                    spread(base), ref)
            )  # fmt: skip
            ratio = statistics.median(t / b for t, b in zip(this, base, strict=True))
            paired.append(f"{name}, {endpoints} endpoint(s): this / base {ratio:.2f} paired")
    return rows, paired


def main() -> None:
    parser = widths_parser(__doc__, deliveries=4000)
    parser.add_argument("--base", default="HEAD~1", help="the commit to compare against")
    args = parser.parse_args()
    ref = subprocess.run(
        ["git", "rev-parse", "--short", args.base], check=True, capture_output=True, text=True
    ).stdout.strip()
    with tempfile.TemporaryDirectory(prefix=f"whs-bench-ab-{ref}-") as scratch:
        base = release_tree.export(ref, Path(scratch))
        result, saved = run_widths(
            "ab", args, lambda d, c, n, r: measure_pair(d, c, n, r, base), base=ref,
            workers=WORKERS,
        )  # fmt: skip
    rows, paired = table(result["by_endpoints"], ref)
    lines = "\n".join(paired)
    (RESULTS / "ab.md").write_text(f"{markdown_table(rows)}\n\n{lines}\n")
    print(f"{text_table(rows)}\n\n{lines}\n{result['seconds']} s; results in {saved}")


if __name__ == "__main__":
    main()
