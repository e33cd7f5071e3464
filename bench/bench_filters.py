"""Payload filters at ingest (issue 18): the API's CPU per event when its application has
100 endpoints each carrying a 5-clause filter, against an application whose 100 endpoints
have none.

    python -m bench.bench_filters [--events 3000] [--rounds 6] [--repeats 5]

About a minute. Two parts:

1. **Per event, in this process**: the 100 filters evaluated on one event (what
   api/endpoint_filters.py LoadedFilters.refused does at ingest), µs (median of
   ``--repeats`` timings).
2. **Per ingested event**, on the bench rig (Valkey with AOF, the API and the scheduler as
   real processes, no worker; bench/rig.py): two applications of 100 endpoints each, one
   filtered, one not; each round a run of ``--events`` events into each (each first in
   every other round, 8 connections as fast as the API answers); the API's CPU per 202
   (``/proc``). Every clause is evaluated (the last one fails), so each event leaves out
   all 100 filtered endpoints and the script is handed their 100 ids: the most a filter
   set of this size costs the API. The endpoints of both applications take only a channel
   the events do not carry, so neither run makes deliveries (no worker drains them) and
   the two differ by the filters alone.

Writes ``bench/results/filters.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from bench.api_cpu import cpu_rounds
from bench.bench_validation import per_call_us
from bench.http_load import build_request
from bench.rig import Rig
from bench.run import RESULTS, machine
from webhook_service.api.endpoint_filters import LoadedFilters
from webhook_service.filters import Filter, FilterEvent

ENDPOINTS = 100
EVENT_TYPE = "bench.filters"
DATA = {
    "amount": 250,
    "currency": "EUR",
    "customer": {"country": "DE", "tier": "gold"},
    "tags": ["vip", "eu"],
    "paid": True,
}


def five_clauses(i: int) -> dict[str, Any]:
    """Four clauses that hold and a fifth that does not: all five are evaluated."""
    return {
        "data.amount": {"$gte": 100 + i},
        "data.currency": {"$in": ["EUR", "USD", "GBP"]},
        "data.customer.country": "DE",
        "data.tags": {"$nin": ["blocked"]},
        "data.customer.tier": {"$neq": "gold"},
    }


def micro(repeats: int) -> float:
    loaded = LoadedFilters(
        1, tuple((f"ep_{i}", Filter.parse(five_clauses(i))) for i in range(ENDPOINTS))
    )
    event = FilterEvent(EVENT_TYPE, DATA)
    assert len(loaded.refused(event)) == ENDPOINTS
    return per_call_us(lambda: loaded.refused(event), repeats, number=300)


async def ingest(events: int, rounds: int) -> dict[str, Any]:
    # Kept when the run fails, for its processes' logs.
    directory = Path(tempfile.mkdtemp(prefix="bench-filters-"))
    rig = await Rig.start(directory, log_level="WARNING")
    try:
        cpu = await _rounds_of_ingest(rig, events, rounds)
    finally:
        await rig.close()
    shutil.rmtree(directory)
    filtered, plain = statistics.median(cpu["filtered"]), statistics.median(cpu["plain"])
    return {
        "api_cpu_us_per_event_filtered": filtered,
        "api_cpu_us_per_event_plain": plain,
        "rounds_filtered": cpu["filtered"],
        "rounds_plain": cpu["plain"],
        "measured_ratio": filtered / plain,
        "median_round_ratio": statistics.median(
            f / p for f, p in zip(cpu["filtered"], cpu["plain"], strict=True)
        ),
    }


async def _application(rig: Rig, name: str, filtered: bool) -> str:
    app_id: str = (await rig.api("POST", "/v1/applications", {"name": name}))["id"]
    for i in range(ENDPOINTS):
        body: dict[str, Any] = {"url": rig.receiver.url(f"{name}-{i}"), "channels": ["elsewhere"]}
        if filtered:
            body["filter"] = five_clauses(i)
        await rig.api("POST", f"/v1/applications/{app_id}/endpoints", body)
    return app_id


async def _rounds_of_ingest(rig: Rig, events: int, rounds: int) -> dict[str, list[float]]:
    """The API's CPU µs per 202 of each round, by application."""
    apps = {
        "filtered": await _application(rig, "filtered", True),
        "plain": await _application(rig, "plain", False),
    }
    kinds = {name: _request(rig, app_id) for name, app_id in apps.items()}
    return await cpu_rounds(rig, kinds, events, rounds)


def _request(rig: Rig, app_id: str) -> Callable[[int], bytes]:
    body = orjson.dumps({"type": EVENT_TYPE, "data": DATA})
    headers = {"Authorization": f"Bearer {rig.admin_key}", "Content-Type": "application/json"}
    request = build_request(
        "POST", f"/v1/applications/{app_id}/events", rig.api_port, body, headers
    )
    return lambda _i: request


def report(figures: dict[str, Any]) -> list[str]:
    run = figures["ingest"]
    plain, filtered = run["api_cpu_us_per_event_plain"], run["api_cpu_us_per_event_filtered"]
    pairs = zip(run["rounds_filtered"], run["rounds_plain"], strict=True)
    return [
        f"{ENDPOINTS} filters of 5 clauses evaluated on one event: {figures['micro_us']:.1f} µs",
        f"ingest, API CPU per event: {filtered:.0f} µs with {ENDPOINTS} filtered endpoints, "
        f"{plain:.0f} µs with {ENDPOINTS} plain ones (medians of the rounds)",
        f"ratio filtered / plain = {run['measured_ratio']:.3f} "
        f"({100 * (run['measured_ratio'] - 1):+.1f} %; median of the rounds' ratios "
        f"{run['median_round_ratio']:.3f}; rounds "
        + ", ".join(f"{f:.0f}/{p:.0f}" for f, p in pairs)
        + ")",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    figures: dict[str, Any] = {"machine": machine(), "micro_us": micro(args.repeats)}
    figures["ingest"] = asyncio.run(ingest(args.events, args.rounds))
    for line in report(figures):
        print(line)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "filters.json").write_bytes(orjson.dumps(figures, option=orjson.OPT_INDENT_2))


if __name__ == "__main__":
    main()
