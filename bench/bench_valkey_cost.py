"""Valkey's cost per script call, on real state, with jemalloc and with libc's malloc.

Each round starts a rig (bench/rig.py: Valkey with AOF, the API, the scheduler and its log
shipper, workers paused) on each allocator in turn, loads events through the API for one
endpoint and for ten, then leases every delivery (ten ids a call, as a wake-up brings them)
and records a 200 for each from this process, one call at a time, reading Valkey's
``INFO commandstats`` and its CPU around each phase. Per unit (an event for ingest, a
delivery for lease and record) it reports the script's time as Valkey counts it, the
commands the script ran inside it (with the scheduler's few in the background: the rest
is the Lua interpreter and redis.call's own cost), and Valkey's CPU in all (what the phase
cost, the background work included).

``python -m bench.bench_valkey_cost`` (part of ``make bench``); the figures are in
docs/benchmarks.md, "Valkey's cost per script call".
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import Any

import redis.asyncio as aredis

from bench.http_load import closed_loop
from bench.report import Row, markdown_table, text_table
from bench.rig import Rig
from bench.run import RESULTS, run_widths, widths_parser
from bench.stats import spread
from webhook_service.store import keys
from webhook_service.store.deliveries import (
    Attempt,
    AttemptOutcome,
    DeliveryStore,
    HealthPolicy,
    Job,
)
from webhook_service.store.scripts import Scripts

# Commands that are the bench's own reading, not the phase's work.
_OURS = frozenset({"cmdstat_info", "cmdstat_fcall"})
_LEASE_BATCH = 10
_LEASE_MS = 60_000
_HEALTH = HealthPolicy(disable_after_ms=5 * 86_400_000, ops_budget=5)
ALLOCATORS = ("jemalloc", "libc")
PHASES = ("ingest", "lease", "record")
FIGURES = ("script_us", "inner_us", "valkey_cpu_us")


class Meter:
    """Valkey's commandstats and CPU before a phase; ``read`` gives them per unit after."""

    def __init__(self, rig: Rig) -> None:
        self._rig = rig
        self._stats, self._cpu = self._now()

    def _now(self) -> tuple[dict[str, Any], float]:
        return self._rig.redis.info("commandstats"), self._rig.valkey_cpu()

    def read(self, units: int) -> dict[str, float]:
        stats, cpu = self._now()

        def usec(name: str, at: dict[str, Any]) -> float:
            return float(at.get(name, {}).get("usec", 0))

        inner = sum(
            usec(name, stats) - usec(name, self._stats) for name in stats if name not in _OURS
        )
        script = usec("cmdstat_fcall", stats) - usec("cmdstat_fcall", self._stats)
        return {
            "script_us": script / units,
            "inner_us": inner / units,
            "valkey_cpu_us": 1e6 * (cpu - self._cpu) / units,
        }


async def one_round(rig: Rig, endpoints: int, events: int) -> dict[str, dict[str, float]]:
    pool = await rig.workers("ours", 2)
    await rig.pause(pool)
    rig.reset()
    event_type = f"bench.cost.{endpoints}"
    await rig.endpoints([f"cost-{endpoints}-{n}" for n in range(endpoints)], event_type)
    meter = Meter(rig)
    loaded = await closed_loop(
        rig.api_port, rig.event_request(event_type), connections=16, count=events
    )
    out = {"ingest": meter.read(loaded.statuses[202])}
    client = aredis.Redis.from_url(rig.valkey.url, decode_responses=True)
    try:
        store = DeliveryStore(client, Scripts(client))
        ids = [
            str(member)
            for bucket in keys.all_buckets()
            for member in await client.zrange(keys.due(bucket), 0, -1)
            if str(member).startswith("dlv_")
        ]
        token, now = secrets.token_hex(8), int(time.time() * 1000)
        meter = Meter(rig)
        jobs: list[Job] = []
        for start in range(0, len(ids), _LEASE_BATCH):
            leased = await store.lease(
                ids[start : start + _LEASE_BATCH], token, now, _LEASE_MS, len(ids)
            )
            jobs += leased.jobs
        out["lease"] = meter.read(max(1, len(jobs)))
        meter = Meter(rig)
        for job in jobs:
            attempt = Attempt(job.attempt, now, 3, 200, None, "ok", {}, {})
            await store.record(
                delivery_id=job.delivery_id,
                token=token,
                now_ms=now + 3,
                attempt=attempt,
                outcome=AttemptOutcome.OK,
                delay_ms=None,
                health=_HEALTH,
            )
        out["record"] = meter.read(max(1, len(jobs)))
    finally:
        await client.aclose()
    return out


async def measure(
    directory: Path, endpoint_counts: list[int], deliveries: int, rounds: int
) -> dict[str, Any]:
    runs: dict[str, dict[str, list[dict[str, dict[str, float]]]]] = {
        str(e): {a: [] for a in ALLOCATORS} for e in endpoint_counts
    }
    for n in range(rounds):
        for allocator in ALLOCATORS:
            rig = await Rig.start(
                directory / f"{allocator}-{n}", log_level="INFO", jemalloc=allocator == "jemalloc"
            )
            try:
                for endpoints in endpoint_counts:
                    events = max(1, deliveries // endpoints)
                    runs[str(endpoints)][allocator].append(await one_round(rig, endpoints, events))
            finally:
                await rig.close()
    return {
        endpoints: {
            allocator: {
                phase: {f: spread([r[phase][f] for r in rs]) for f in FIGURES} for phase in PHASES
            }
            for allocator, rs in by_allocator.items()
        }
        for endpoints, by_allocator in runs.items()
    }


def table(result: dict[str, Any]) -> list[Row]:
    """Per phase: jemalloc's figure beside libc's (libc ÷ jemalloc: above 1, jemalloc
    cheaper)."""
    names = {
        "script_us": "script time",
        "inner_us": "  of which its commands",
        "valkey_cpu_us": "  Valkey CPU in all",
    }
    unit = {"ingest": "µs/event", "lease": "µs/delivery", "record": "µs/delivery"}
    return [
        Row(
            f"{endpoints} endpoint(s)",
            f"{phase}: {names[figure]}",
            by_allocator["jemalloc"][phase][figure],
            unit[phase],
            "lower",
            by_allocator["libc"][phase][figure],
            "libc malloc",
        )
        for endpoints, by_allocator in result.items()
        for phase in PHASES
        for figure in FIGURES
    ]


def main() -> None:
    args = widths_parser(__doc__, deliveries=3000).parse_args()
    result, saved = run_widths("valkey_cost", args, measure)
    rows = table(result["by_endpoints"])
    (RESULTS / "valkey_cost.md").write_text(markdown_table(rows) + "\n")
    print(f"{text_table(rows)}\n\n{result['seconds']} s; results in {saved}")


if __name__ == "__main__":
    main()
