"""History pages at 1 k and at 1 M deliveries: a filtered page should cost the same.

    python bench/bench_history.py [--small 1000] [--large 1000000] [--repeats 200]

Fills a throw-away Valkey straight through pipelines (the records and every index entry
the Lua scripts would have written, named by ``keys.py``), times each query's first page
through the API's own code (``store/history.py``) at the small size, grows the same data
set to the large size and times them again, then a page deep in the large history (after
200 cursors). Prints the median ms per page and the ratios; the claim holds when they sit
near 1. AOF is off on this server: only reads are measured.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    # Run as a script, only bench/ is on sys.path; the service lives at the repo root.
    sys.path.insert(0, str(ROOT))

import redis  # noqa: E402
from redis.asyncio import Redis  # noqa: E402

from webhook_service.embedded import start_valkey  # noqa: E402
from webhook_service.ids import new_id  # noqa: E402
from webhook_service.store import keys  # noqa: E402
from webhook_service.store.connect import async_client  # noqa: E402
from webhook_service.store.deliveries import DeliveryStore  # noqa: E402
from webhook_service.store.history import (  # noqa: E402
    DeliveryFilter,
    EventFilter,
    list_deliveries,
    list_events,
)
from webhook_service.store.scripts import Scripts  # noqa: E402

ENDPOINTS = [f"ep_{n:026d}" for n in range(4)]
TYPES = [f"order.t{n}" for n in range(10)]
PRODUCERS = ["key_billing", "key_shop", "key_ops"]
FANOUT = 2  # deliveries per event
PAGE = 20
START_MS = 1_700_000_000_000
CHUNK = 5000  # events per pipeline

# (label, the query): each has at least PAGE matches at 1 k deliveries, so both sizes
# answer whole pages and the comparison is page for page.
DELIVERY_QUERIES: list[tuple[str, DeliveryFilter]] = [
    ("deliveries, no filter", DeliveryFilter()),
    ("endpoint + status=failed", DeliveryFilter(endpoint_id=ENDPOINTS[1], status="failed")),
    ("status_class=5xx", DeliveryFilter(status_class="5xx")),
    ("endpoint + status_class=5xx", DeliveryFilter(endpoint_id=ENDPOINTS[2], status_class="5xx")),
    ("attempts_min=3", DeliveryFilter(attempts_min=3)),
    # Unindexed (keys.UNINDEXED_*): read from the endpoint's index, filtered while read.
    ("endpoint + status=succeeded", DeliveryFilter(endpoint_id=ENDPOINTS[3], status="succeeded")),
    ("event_type", DeliveryFilter(event_type=TYPES[3])),
]
EVENT_QUERIES: list[tuple[str, EventFilter]] = [
    ("events, type", EventFilter(event_type=TYPES[5])),
    ("events, key_id", EventFilter(key_id=PRODUCERS[1])),
]


def _outcome(rng: random.Random) -> tuple[str, str | None, int, str, str]:
    """status, class, attempts, code, error: 60 % succeed, 30 % fail, 10 % still pending."""
    roll = rng.random()
    if roll < 0.6:
        attempts = 1 if rng.random() < 0.8 else 2
        return "succeeded", "2xx", attempts, "200", ""
    if roll < 0.9:
        kind = rng.choice(["5xx", "5xx", "4xx", "timeout", "network"])
        code = {"5xx": "503", "4xx": "400"}.get(kind, "")
        error = {"timeout": "timeout", "network": "connection"}.get(kind, "")
        return "failed", kind, 8, code, error
    if rng.random() < 0.5:
        return "pending", None, 0, "", ""
    return "pending", "5xx", rng.randint(1, 4), "503", ""


def populate(client: redis.Redis, events: int, first: int, rng: random.Random) -> None:
    """Events first..first+events-1, FANOUT deliveries each, written as ingest.lua and
    record.lua would leave them."""
    for start in range(first, first + events, CHUNK):
        with client.pipeline(transaction=False) as pipe:
            for n in range(start, min(start + CHUNK, first + events)):
                _event(pipe, n, rng)
            pipe.execute()


def _event(pipe: redis.client.Pipeline, n: int, rng: random.Random) -> None:
    now = START_MS + n * 10
    event_id = new_id("msg", now)
    etype, producer = rng.choice(TYPES), rng.choice(PRODUCERS)
    ids = []
    for ep in rng.sample(ENDPOINTS, FANOUT):
        delivery_id = f"dlv_{event_id[4:]}{ep[3:]}"
        ids.append(delivery_id)
        status, status_class, attempts, code, error = _outcome(rng)
        pipe.hset(
            keys.delivery(delivery_id),
            mapping={
                "event": event_id, "endpoint": ep, "type": etype, "status": status,
                "attempts": attempts, "budget": 8, "next_at": now, "created": now,
                "updated": now, "code": code, "error": error, "class": status_class or "",
            },
        )  # fmt: skip
        # The dense values have no index (keys.UNINDEXED_*), as in the Lua scripts.
        indexes = [keys.DELIVERIES_INDEX, keys.deliveries_by_endpoint(ep)]
        indexes.append(keys.deliveries_by_type(etype))
        if status_class and status_class not in keys.UNINDEXED_CLASSES:
            indexes.append(keys.deliveries_by_class(status_class))
            indexes.append(keys.deliveries_by_endpoint_class(ep, status_class))
        if status not in keys.UNINDEXED_STATUSES:
            indexes.append(keys.deliveries_by_status(status))
            indexes.append(keys.deliveries_by_endpoint_status(ep, status))
        if attempts not in keys.UNINDEXED_ATTEMPTS:
            indexes.append(keys.deliveries_by_attempts(attempts))
            pipe.sadd(keys.ATTEMPT_COUNTS, attempts)
        for index in indexes:
            pipe.zadd(index, {delivery_id: 0})
    pipe.hset(
        keys.event(event_id),
        mapping={
            "type": etype,
            "created": now,
            "body": '{"data":{}}',
            "key": producer,
            "dlvs": ",".join(ids),
        },
    )
    for index in (keys.EVENTS_INDEX, keys.events_by_type(etype), keys.events_by_key(producer)):
        pipe.zadd(index, {event_id: 0})


Fetch = Callable[[str | None], Awaitable[str | None]]
DEEP = 200  # cursors walked before the deep page
ROUNDS = 3  # the lowest round's median stands: the others' noise is other work on the host


@dataclass(frozen=True)
class Cost:
    ms: float  # wall time per page, client and server together
    server_us: float  # Valkey's own time per page (INFO commandstats), a steadier figure


async def _cost(client: Redis, fetch: Fetch, cursor: str | None, repeats: int) -> Cost:
    await client.config_resetstat()
    medians = []
    for _ in range(ROUNDS):
        samples = []
        for _ in range(repeats):
            began = time.perf_counter()
            await fetch(cursor)
            samples.append((time.perf_counter() - began) * 1000)
        medians.append(statistics.median(samples))
    stats = await client.info("commandstats")
    spent = sum(
        row["usec"] for name, row in stats.items() if not name.startswith(("config", "info"))
    )
    return Cost(min(medians), spent / (ROUNDS * repeats))


async def _deep_cursor(fetch: Fetch) -> str | None:
    cursor = None
    for _ in range(DEEP):
        cursor = await fetch(cursor)
    return cursor


def _fetchers(client: Redis) -> dict[str, Fetch]:
    """One page fetcher per query, each checking it got a whole page."""
    store = DeliveryStore(client, Scripts(client))
    fetchers: dict[str, Fetch] = {}
    for label, query in DELIVERY_QUERIES:

        async def deliveries(cursor: str | None, q: DeliveryFilter = query) -> str | None:
            page = await list_deliveries(client, store, q, PAGE, cursor)
            assert len(page.items) == PAGE, (q, len(page.items))
            return page.next_cursor

        fetchers[label] = deliveries
    for label, event_query in EVENT_QUERIES:

        async def events(cursor: str | None, q: EventFilter = event_query) -> str | None:
            page = await list_events(client, q, PAGE, cursor)
            assert len(page.items) == PAGE, (q, len(page.items))
            return page.next_cursor

        fetchers[label] = events
    return fetchers


async def measure(url: str, repeats: int, deep: bool) -> dict[str, tuple[Cost, Cost | None]]:
    """Per query: the cost of the first page, and of the deep page when asked."""
    client = async_client(url)
    results = {}
    try:
        for label, fetch in _fetchers(client).items():
            first = await _cost(client, fetch, None, repeats)
            later = await _cost(client, fetch, await _deep_cursor(fetch), repeats) if deep else None
            results[label] = (first, later)
    finally:
        await client.aclose()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=1000, help="deliveries, first size")
    parser.add_argument("--large", type=int, default=1_000_000, help="deliveries, second size")
    parser.add_argument("--repeats", type=int, default=200, help="timed pages per query")
    args = parser.parse_args()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        server = start_valkey(Path(tmp) / "valkey", extra=("--appendonly", "no"))
        try:
            client = redis.Redis.from_url(server.url, decode_responses=True)
            small_events, large_events = args.small // FANOUT, args.large // FANOUT
            populate(client, small_events, 0, rng)
            small = asyncio.run(measure(server.url, args.repeats, deep=False))
            began = time.perf_counter()
            # The small set's events stay the oldest; the large set is the same set grown.
            populate(client, large_events - small_events, small_events, rng)
            filled = time.perf_counter() - began
            used = client.info("memory")["used_memory_human"]
            large = asyncio.run(measure(server.url, args.repeats, deep=True))
        finally:
            server.stop()
    print(f"filled {args.large:,} deliveries in {filled:.0f} s; Valkey holds {used}")
    print(
        f"per page of {PAGE}: median ms (lowest of {ROUNDS} rounds of {args.repeats}) and "
        f"Valkey's µs; deep: after {DEEP} cursors\n"
    )
    sizes = f"{args.small:,} | {args.large:,}"
    print(f"| query | ms at {sizes} | ratio | µs at {sizes} | ratio | deep ms | deep µs |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, (a, _) in small.items():
        b, deep = large[label]
        assert deep is not None
        print(
            f"| {label} | {a.ms:.2f} | {b.ms:.2f} | {b.ms / a.ms:.2f} "
            f"| {a.server_us:.0f} | {b.server_us:.0f} | {b.server_us / a.server_us:.2f} "
            f"| {deep.ms:.2f} | {deep.server_us:.0f} |"
        )


if __name__ == "__main__":
    main()
