"""How much of the grid a run measures: ``quick`` for ``make bench``, ``full`` for the rest."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Plan:
    name: str
    repeats: int  # of every figure; the report gives their median, lowest and highest
    load_seconds: float  # one open-loop run
    floor_seconds: float  # one closed-loop run against a floor server
    bisections: int  # after the climb that brackets the highest sustained rate
    searches: int  # how many times that whole search runs (it is the slowest figure)
    deliveries: int  # per delivery-throughput run
    latency_seconds: float
    fanout_events: int  # sent one by one at each fan-out width
    footprint_events: int  # accepted and held in flight, then delivered (bench/footprint.py)
    ingest_rates: tuple[int, ...] = (500, 1000, 2000)
    endpoint_counts: tuple[int, ...] = (1, 10, 100)
    worker_counts: tuple[int, ...] = (1, 2, 4)
    fanout_widths: tuple[int, ...] = (1, 1000)
    latency_rate: int = 200
    fanout: int = 3  # endpoints per event in the ingest, latency and footprint runs
    # Each worker is one Celery prefork process, as WEBHOOK_WORKER_CONCURRENCY's default.
    default_workers: int = 2


QUICK = Plan(
    name="quick",
    repeats=2,
    load_seconds=2.0,
    floor_seconds=2.0,
    bisections=1,
    searches=1,
    deliveries=1000,
    latency_seconds=4.0,
    fanout_events=3,
    footprint_events=2000,
)

FULL = Plan(
    name="full",
    repeats=5,
    load_seconds=8.0,
    floor_seconds=5.0,
    bisections=3,
    searches=3,
    deliveries=4000,
    latency_seconds=15.0,
    fanout_events=10,
    footprint_events=5000,
)

# Seconds, not minutes: checks that the suite itself still works, its figures mean little.
SMOKE = Plan(
    name="smoke",
    repeats=1,
    load_seconds=1.0,
    floor_seconds=1.0,
    bisections=0,
    searches=1,
    deliveries=300,
    latency_seconds=1.0,
    fanout_events=1,
    footprint_events=300,
    ingest_rates=(500,),
    endpoint_counts=(1, 10),
    worker_counts=(1, 2),
    fanout_widths=(1, 100),
)

PLANS = {plan.name: plan for plan in (SMOKE, QUICK, FULL)}
