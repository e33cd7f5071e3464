"""History pages at 10 k and at 1 M (or 10 M) deliveries: a page costs the page, not the history.

    python -m bench.bench_history [--small 10000] [--large 1000000] [--repeats 50]
                                  [--log-url postgresql://…/empty_db]

1 M by default (`make bench`): filling 10 M (`--large 10000000`) takes 8 to 11 minutes on the
2-core host (docs/benchmarks.md), past the few the whole of `make bench` may take.

Fills the delivery log (SQLite in a temp dir; or the PostgreSQL database --log-url names,
which must be empty: the bench migrates it and leaves the rows there) straight in SQL, with
what the shipper would have written for events of 2 deliveries each (4 endpoints, 10
types, 3 producer keys; 60 % succeeded, 30 % failed after 8 attempts, 10 % pending), 10 ms
apart. Then it times the first page (50 items, the API's default) of every filter through
``history/reader.py``, the code behind the API (the pending rows of a page are looked up in
a throw-away Valkey, as the API does; it holds none of them), grows the same data to the
large size, times them again, and a page 200 cursors deep. Prints the median ms per page
(the lowest of 3 rounds) and the ratios; the claim holds when they sit near 1.

The fill is the only part written for speed: SQLite drops the log's indexes while rows go in
and makes them again from their own definitions afterwards (one sort each, not ten million
inserts), with the file's durability off; no statistics are gathered (the service gathers
none either).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa
from pydantic import SecretStr
from redis.asyncio import Redis

from webhook_service.config import Settings
from webhook_service.embedded import start_valkey
from webhook_service.history.database import async_engine, sync_engine, upgrade
from webhook_service.history.filters import DeliveryFilter, EventFilter
from webhook_service.history.queries import delivery_scan
from webhook_service.history.reader import HistoryReader
from webhook_service.store.deliveries import DeliveryStore
from webhook_service.store.events import EventStore
from webhook_service.store.scripts import Scripts

PAGE = 50
ROUNDS = 3  # the lowest round's median stands: the others' noise is other work on the host
DEEP = 200  # cursors walked before the deep page
CHUNK = 500_000  # events per INSERT
_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # ids.py's
# Aligned so that the top 20 bits of every event's time are the same (the data spans far
# less than 2**30 ms): the SQL below encodes only the 30 bits that change.
START = (1_700_000_000_000 >> 30) << 30
EVERY_MS = 10


def _encode(value: int, length: int) -> str:
    return "".join(_ALPHABET[(value >> 5 * (length - 1 - i)) & 31] for i in range(length))


def _sql_encode(expr: str, length: int) -> str:
    """``ids._encode`` in SQL that SQLite and PostgreSQL both run."""
    return " || ".join(
        f"substr('{_ALPHABET}', CAST((({expr}) >> {5 * (length - 1 - i)}) % 32 + 1 AS INTEGER), 1)"
        for i in range(length)
    )


def event_id(n: int) -> str:
    """Event n's id, as the SQL below makes it: its time, then n in 16 digits (any
    character of the alphabet will do for the random part; these keep ids unique)."""
    return f"msg_{_encode(START + n * EVERY_MS, 10)}{n:016d}"


def event_ms(n: int) -> int:
    return START + n * EVERY_MS


# Event n: its id (as event_id), type and producer key from a hash of n. (S608 below: the
# SQL is made of this module's constants alone; the bounds go in as parameters.)
_EVENTS = f"""
WITH RECURSIVE s(n) AS (SELECT CAST(:first AS BIGINT) UNION ALL SELECT n + 1 FROM s WHERE n < :last)
INSERT INTO events (id, created_ms, type, key_id, idempotency_key, body, expunged_ms)
SELECT 'msg_{_encode(START >> 30, 4)}' || {_sql_encode(f"n * {EVERY_MS}", 6)}
       || substr('0000000000000000' || n, length(n || '') + 1),
  {START} + n * {EVERY_MS}, 'order.t' || ((n * 2654435761) % 1000003 % 10),
  'key_' || ((n * 40503) % 65521 % 3), NULL, '{{"data":{{}}}}', NULL
FROM s
"""  # noqa: S608
# Two deliveries per event (f = 0, 1) to two of four endpoints; h, a hash of the delivery's
# number, picks its fate: 48 % succeeded at once, 12 % at the second try, 30 % failed after
# 8 (5xx, 4xx, timeout, network), 5 % pending untried, 5 % pending after 5xx answers.
_H = f"((((created_ms - {START}) / {EVERY_MS}) * 2 + f) * 2654435761) % 1000003"
_DELIVERIES = f"""
INSERT INTO deliveries (id, created_ms, event_id, endpoint_id, event_type, status, attempts,
  updated_ms, next_at_ms, last_code, last_error, last_class, log_seq)
SELECT 'dlv_' || substr(id, 5) || '1' || (ep + 1), created_ms, id, 'ep_bench' || ep, type,
  CASE WHEN h % 100 < 60 THEN 'succeeded' WHEN h % 100 < 90 THEN 'failed' ELSE 'pending' END,
  CASE WHEN h % 100 < 48 THEN 1 WHEN h % 100 < 60 THEN 2 WHEN h % 100 < 90 THEN 8
       WHEN h % 100 < 95 THEN 0 ELSE h % 4 + 1 END,
  created_ms, CASE WHEN h % 100 >= 90 THEN created_ms END,
  CASE WHEN h % 100 < 60 THEN 200 WHEN h % 100 >= 95 THEN 503
       WHEN h % 100 < 90 AND h % 5 < 2 THEN 503 WHEN h % 100 < 90 AND h % 5 = 2 THEN 400 END,
  CASE WHEN h % 100 >= 60 AND h % 100 < 90 AND h % 5 = 3 THEN 'timeout'
       WHEN h % 100 >= 60 AND h % 100 < 90 AND h % 5 = 4 THEN 'connection' END,
  CASE WHEN h % 100 < 60 THEN '2xx' WHEN h % 100 >= 95 THEN '5xx' WHEN h % 100 >= 90 THEN NULL
       WHEN h % 5 < 2 THEN '5xx' WHEN h % 5 = 2 THEN '4xx' WHEN h % 5 = 3 THEN 'timeout'
       ELSE 'network' END,
  0
FROM (SELECT id, created_ms, type, f, f + 2 * (((created_ms - {START}) / {EVERY_MS}) % 2) AS ep,
             {_H} AS h
      FROM events, (SELECT 0 AS f UNION ALL SELECT 1) AS fan
      WHERE created_ms >= :low AND created_ms <= :high) AS made
ORDER BY id
"""  # noqa: S608


def fill(engine: sa.Engine, first: int, last: int) -> None:
    """Events first..last - 1, and their deliveries."""
    sqlite = engine.dialect.name == "sqlite"
    with engine.begin() as conn:
        indexes: list[tuple[str, str]] = []
        if sqlite:
            for pragma in ("cache_size=-2000000", "synchronous=OFF", "threads=2"):
                conn.exec_driver_sql(f"PRAGMA {pragma}")
            indexes = [
                (str(name), str(sql))
                for name, sql in conn.exec_driver_sql(
                    "SELECT name, sql FROM sqlite_master WHERE type = 'index'"
                    " AND tbl_name IN ('events', 'deliveries') AND sql IS NOT NULL"
                )
            ]
            for name, _ in indexes:
                conn.exec_driver_sql(f'DROP INDEX "{name}"')
        for start in range(first, last, CHUNK):
            end = min(last, start + CHUNK) - 1
            conn.execute(sa.text(_EVENTS), {"first": start, "last": end})
            conn.execute(sa.text(_DELIVERIES), {"low": event_ms(start), "high": event_ms(end)})
        for _, sql in indexes:
            conn.exec_driver_sql(sql)
        if not sqlite:
            conn.exec_driver_sql("ANALYZE")  # PostgreSQL's autovacuum would, given time


# One page from a cursor: the next cursor, and how many items the page held.
Fetch = Callable[[str | None], Awaitable[tuple[str | None, int]]]


def _queries(events: int, small_events: int) -> dict[str, DeliveryFilter | EventFilter]:
    """``events``: how many there are now; the small set's were the first ``small_events``."""
    newest, small_end = events - 1, small_events - 1
    ep = "ep_bench1"
    return {
        "deliveries, no filter": DeliveryFilter(),
        "endpoint_id": DeliveryFilter(endpoint_id=ep),
        "event_id": DeliveryFilter(event_id=event_id(newest)),
        "status=failed": DeliveryFilter(status="failed"),
        "status=pending": DeliveryFilter(status="pending"),
        "event_type": DeliveryFilter(event_type="order.t3"),
        "status_class=5xx": DeliveryFilter(status_class="5xx"),
        "status_class=timeout": DeliveryFilter(status_class="timeout"),
        "attempts_min=8": DeliveryFilter(attempts_min=8),
        "attempts 2..2": DeliveryFilter(attempts_min=2, attempts_max=2),
        "attempts_max=0": DeliveryFilter(attempts_max=0),
        "since (last 10 min)": DeliveryFilter(since_ms=event_ms(newest) - 600_000),
        "until (the small set's end)": DeliveryFilter(until_ms=event_ms(small_end)),
        "endpoint + status=failed": DeliveryFilter(endpoint_id=ep, status="failed"),
        "endpoint + status_class=5xx": DeliveryFilter(endpoint_id=ep, status_class="5xx"),
        "event_type + status=failed": DeliveryFilter(event_type="order.t3", status="failed"),
        "endpoint + event_type": DeliveryFilter(endpoint_id=ep, event_type="order.t3"),
        "events, no filter": EventFilter(),
        "events, type": EventFilter(event_type="order.t5"),
        "events, key_id": EventFilter(key_id="key_1"),
        "events, type + key_id": EventFilter(event_type="order.t5", key_id="key_1"),
        "events, since": EventFilter(since_ms=event_ms(newest) - 600_000),
    }


def _fetcher(reader: HistoryReader, query: DeliveryFilter | EventFilter) -> Fetch:
    """One page of the query. A page whose filters the index it walks holds whole (every
    event query, most delivery ones) is checked to be whole (an event has two deliveries);
    any other may stop short at the reader's budget."""
    exact = isinstance(query, EventFilter) or delivery_scan(query).exact
    want = 2 if isinstance(query, DeliveryFilter) and query.event_id else PAGE

    async def fetch(cursor: str | None) -> tuple[str | None, int]:
        if isinstance(query, DeliveryFilter):
            page = await reader.list_deliveries(query, PAGE, cursor)
            size = len(page.items)
            cursor = page.next_cursor
        else:
            events = await reader.list_events(query, PAGE, cursor)
            size = len(events.items)
            cursor = events.next_cursor
        # Short: at the reader's budget, or the last page (a whole one hands a cursor on).
        assert size == want or not exact or cursor is None, (query, size)
        return cursor, size

    return fetch


async def _cost(fetch: Fetch, cursor: str | None, repeats: int) -> float:
    medians = []
    for _ in range(ROUNDS):
        samples = []
        for _ in range(repeats):
            began = time.perf_counter()
            await fetch(cursor)
            samples.append((time.perf_counter() - began) * 1000)
        medians.append(statistics.median(samples))
    return min(medians)


async def _deep_cursor(fetch: Fetch) -> str | None:
    """The cursor DEEP pages in; None if the query has no page after those."""
    cursor = None
    for _ in range(DEEP):
        cursor, _ = await fetch(cursor)
        if cursor is None:
            return None
    return cursor if (await fetch(cursor))[0] is not None else None


@dataclass(frozen=True)
class Cost:
    ms: float  # the first page
    items: int  # in the first page: fewer than PAGE where the reader's budget ran out
    deep_ms: float | None  # a page DEEP cursors in, when asked for and there is one


async def measure(
    settings: Settings, redis_url: str, sizes: tuple[int, int], repeats: int, deep: bool
) -> dict[str, Cost]:
    engine = async_engine(settings)
    client = Redis.from_url(redis_url, decode_responses=True)
    scripts = Scripts(client)
    reader = HistoryReader(
        engine, DeliveryStore(client, scripts), EventStore(client, scripts), settings.log_timeout
    )
    results: dict[str, Cost] = {}
    try:
        for label, query in _queries(*sizes).items():
            fetch = _fetcher(reader, query)
            first = await _cost(fetch, None, repeats)
            later = None
            if deep:
                cursor = await _deep_cursor(fetch)
                later = None if cursor is None else await _cost(fetch, cursor, repeats)
            results[label] = Cost(first, (await fetch(None))[1], later)
    finally:
        await engine.dispose()
        await client.aclose()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--small", type=int, default=10_000, help="deliveries, first size")
    parser.add_argument("--large", type=int, default=1_000_000, help="deliveries, second")
    parser.add_argument("--repeats", type=int, default=50, help="timed pages per round")
    parser.add_argument("--log-url", help="an empty PostgreSQL database (default: SQLite)")
    args = parser.parse_args()
    small_events, large_events = args.small // 2, args.large // 2
    assert large_events * EVERY_MS < 2**30, "the data would span more than 2**30 ms"
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(
            data_dir=Path(tmp),
            log_url=SecretStr(args.log_url) if args.log_url else None,
        )
        engine = sync_engine(settings)
        server = start_valkey(Path(tmp) / "valkey", extra=("--appendonly", "no"))
        try:
            upgrade(engine)
            fill(engine, 0, small_events)
            at_small = (small_events, small_events)
            small = asyncio.run(measure(settings, server.url, at_small, args.repeats, False))
            began = time.perf_counter()
            # The small set's events stay the oldest; the large set is the same set grown.
            fill(engine, small_events, large_events)
            filled = time.perf_counter() - began
            at_large = (large_events, small_events)
            large = asyncio.run(measure(settings, server.url, at_large, args.repeats, True))
        finally:
            engine.dispose()
            server.stop()
    backend = engine.dialect.name
    print(
        f"{backend}: filled {args.large:,} deliveries ({large_events:,} events) in {filled:.0f} s"
    )
    print(f"per page of {PAGE}: median ms, lowest of {ROUNDS} rounds of {args.repeats}; deep: "
          f"after {DEEP} cursors\n")  # fmt: skip
    print(f"| query | ms at {args.small:,} | ms at {args.large:,} | ratio | deep ms | items |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, a in small.items():
        b = large[label]
        deep = f"{b.deep_ms:.2f}" if b.deep_ms is not None else "-"
        print(f"| {label} | {a.ms:.2f} | {b.ms:.2f} | {b.ms / a.ms:.2f} | {deep} | {b.items} |")


if __name__ == "__main__":
    main()
