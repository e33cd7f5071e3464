"""History pages (deliveries and events): newest first, by id, from the smallest index.

Ids sort by time, so a time range is an id range and a cursor is the last id seen: paging
never re-reads what it has already returned, and new entries (larger ids) never shift a
page. Every filter has indexes, some per endpoint too (``keys.py``); a query reads the
smallest of the indexes its filters name, so its cost follows the page, not the history.
Filters that index does not cover are applied while reading, with a bound on how much one
page may read, and for how long. The values most deliveries end with have no index
(``keys.UNINDEXED_*``): a query for one reads the broader indexes its other filters name,
or every delivery, and filters while reading; those values being dense, a page fills
about as fast.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar, cast

from redis.asyncio import Redis

from webhook_service.ids import event_deliveries, id_bound, id_time_ms
from webhook_service.store import keys
from webhook_service.store.deliveries import DeliveryRecord, DeliveryStore

# How many index entries one page may examine, and for how long, before it returns what
# it has and a cursor to go on from. Filters that meet rarely would otherwise make one
# request (even limit=1) read the whole budget: 117 ms for 5 000 entries.
_SCAN_BUDGET = 5000
_SCAN_SECONDS = 0.025

# The class of a delivery's last attempt, as record.lua stores it.
STATUS_CLASSES = ("2xx", "3xx", "4xx", "5xx", "timeout", "network")


class _Listed(Protocol):
    @property
    def id(self) -> str: ...


T = TypeVar("T", bound=_Listed)
# A source is the union of a few indexes (most often one), read newest first.
Source = tuple[str, ...]


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    next_cursor: str | None


@dataclass(frozen=True)
class TimeRange:
    """The creation-time window every history filter has."""

    since_ms: int | None = None
    until_ms: int | None = None

    def covers(self, ms: int) -> bool:
        return (self.since_ms is None or ms >= self.since_ms) and (
            self.until_ms is None or ms <= self.until_ms
        )

    def lex_bounds(self, prefix: str, cursor: str | None) -> tuple[str, str]:
        """(upper, lower) for ZREVRANGEBYLEX, starting below the cursor."""
        upper = "+"
        if self.until_ms is not None:
            upper = "[" + id_bound(prefix, self.until_ms, upper=True) + "~"
        if cursor and (upper == "+" or cursor < upper[1:]):
            upper = "(" + cursor
        lower = "-"
        if self.since_ms is not None:
            lower = "[" + id_bound(prefix, self.since_ms, upper=False)
        return upper, lower


@dataclass(frozen=True)
class DeliveryFilter(TimeRange):
    """Flat and JSON-able: bulk jobs store the filter they page with (store/jobs.py)."""

    endpoint_id: str | None = None
    event_id: str | None = None
    status: str | None = None
    event_type: str | None = None
    status_class: str | None = None
    attempts_min: int | None = None
    attempts_max: int | None = None

    def matches(self, record: DeliveryRecord) -> bool:
        return (
            (self.endpoint_id is None or record.endpoint_id == self.endpoint_id)
            and (self.event_id is None or record.event_id == self.event_id)
            and (self.status is None or record.status == self.status)
            and (self.event_type is None or record.event_type == self.event_type)
            and (self.status_class is None or record.last_class == self.status_class)
            and self.wants_attempts(record.attempts)
        )

    def wants_attempts(self, count: int) -> bool:
        return (self.attempts_min is None or count >= self.attempts_min) and (
            self.attempts_max is None or count <= self.attempts_max
        )

    def sources(self, attempt_counts: Sequence[int]) -> list[Source]:
        """Every index that holds all the matches, the compound ones first. A value no index
        holds (keys.UNINDEXED_*) offers none: a broader one answers, filtered while read."""
        ep, found = self.endpoint_id, list[Source]()
        status = self.status if self.status not in keys.UNINDEXED_STATUSES else None
        status_class = (
            self.status_class if self.status_class not in keys.UNINDEXED_CLASSES else None
        )
        if ep is not None and status is not None:
            found.append((keys.deliveries_by_endpoint_status(ep, status),))
        if ep is not None and status_class is not None:
            found.append((keys.deliveries_by_endpoint_class(ep, status_class),))
        if ep is not None:
            found.append((keys.deliveries_by_endpoint(ep),))
        if status is not None:
            found.append((keys.deliveries_by_status(status),))
        if status_class is not None:
            found.append((keys.deliveries_by_class(status_class),))
        if self.event_type is not None:
            found.append((keys.deliveries_by_type(self.event_type),))
        if (self.attempts_min is not None or self.attempts_max is not None) and not any(
            self.wants_attempts(n) for n in keys.UNINDEXED_ATTEMPTS
        ):
            counts = sorted(
                n
                for n in attempt_counts
                if self.wants_attempts(n) and n not in keys.UNINDEXED_ATTEMPTS
            )
            found.append(tuple(keys.deliveries_by_attempts(n) for n in counts))
        return found or [(keys.DELIVERIES_INDEX,)]


@dataclass(frozen=True)
class EventFilter(TimeRange):
    event_type: str | None = None
    key_id: str | None = None

    def matches(self, event: EventSummary) -> bool:
        return (self.event_type is None or event.type == self.event_type) and (
            self.key_id is None or event.key_id == self.key_id
        )

    def sources(self) -> list[Source]:
        found = list[Source]()
        if self.event_type is not None:
            found.append((keys.events_by_type(self.event_type),))
        if self.key_id is not None:
            found.append((keys.events_by_key(self.key_id),))
        return found or [(keys.EVENTS_INDEX,)]


@dataclass(frozen=True)
class EventSummary:
    """An event as a list shows it: no payload (that can be 256 KiB)."""

    id: str
    type: str
    created_ms: int
    key_id: str
    deliveries: int
    payload_deleted: bool


async def list_deliveries(
    redis: Redis, store: DeliveryStore, query: DeliveryFilter, limit: int, cursor: str | None
) -> Page[DeliveryRecord]:
    if query.event_id is not None:
        return await _from_event(redis, store, query, limit, cursor)
    counts: list[int] = []
    if query.attempts_min is not None or query.attempts_max is not None:
        members = cast(set[str], await redis.smembers(keys.ATTEMPT_COUNTS))
        counts = [int(n) for n in members]
    source = await _smallest(redis, query.sources(counts))
    upper, lower = query.lex_bounds("dlv", cursor)
    return await _scan(redis, source, upper, lower, limit, store.get_many, query.matches)


async def list_events(
    redis: Redis, query: EventFilter, limit: int, cursor: str | None
) -> Page[EventSummary]:
    source = await _smallest(redis, query.sources())
    upper, lower = query.lex_bounds("msg", cursor)

    async def load(ids: Sequence[str]) -> list[EventSummary]:
        return await event_summaries(redis, ids)

    return await _scan(redis, source, upper, lower, limit, load, query.matches)


async def event_summaries(redis: Redis, ids: Sequence[str]) -> list[EventSummary]:
    async with redis.pipeline(transaction=False) as pipe:
        for event_id in ids:
            pipe.hmget(keys.event(event_id), ["type", "created", "key", "dlvs", "expunged"])
        rows: list[list[str | None]] = await pipe.execute()
    return [
        EventSummary(
            id=event_id,
            type=etype,
            created_ms=int(created) if created else id_time_ms(event_id),
            key_id=key or "",
            deliveries=len([d for d in (dlvs or "").split(",") if d]),
            payload_deleted=expunged is not None,
        )
        for event_id, (etype, created, key, dlvs, expunged) in zip(ids, rows, strict=True)
        if etype is not None
    ]


async def _smallest(redis: Redis, sources: list[Source]) -> Source:
    """The source with the fewest entries: the one a page reads least of to fill itself."""
    if len(sources) == 1:
        return sources[0]
    async with redis.pipeline(transaction=False) as pipe:
        for source in sources:
            for key in source:
                pipe.zcard(key)
        sizes: list[int] = await pipe.execute()
    totals, at = [], 0
    for source in sources:
        totals.append(sum(sizes[at : at + len(source)]))
        at += len(source)
    return sources[totals.index(min(totals))]


async def _newest(redis: Redis, source: Source, upper: str, lower: str, num: int) -> list[str]:
    """Up to num ids of the union of the source's indexes, newest first, below `upper`."""
    if len(source) == 1:
        return cast(list[str], await redis.zrevrangebylex(source[0], upper, lower, 0, num))
    async with redis.pipeline(transaction=False) as pipe:
        for key in source:
            pipe.zrevrangebylex(key, upper, lower, 0, num)
        runs: list[list[str]] = await pipe.execute()
    # Each index is sorted, so the first `num` of the merge are within each one's first `num`.
    merged: list[str] = []
    for entry in heapq.merge(*runs, reverse=True):
        if not merged or merged[-1] != entry:
            merged.append(entry)
            if len(merged) == num:
                break
    return merged


async def _scan(
    redis: Redis,
    source: Source,
    upper: str,
    lower: str,
    limit: int,
    load: Callable[[Sequence[str]], Awaitable[list[T]]],
    matches: Callable[[T], bool],
) -> Page[T]:
    if not source:
        return Page([], None)
    items: list[T] = []
    scanned = 0
    deadline = time.monotonic() + _SCAN_SECONDS
    # Each batch is examined whole, so the cursor (its last id) skips nothing; the first
    # always runs, so every page moves on, however slow the store.
    while True:
        batch = min(max(limit * 2, 50), _SCAN_BUDGET - scanned)
        ids = await _newest(redis, source, upper, lower, batch)
        if not ids:
            return Page(items, None)
        scanned += len(ids)
        for item in await load(ids):
            if matches(item):
                items.append(item)
                if len(items) == limit:
                    return Page(items, item.id)
        upper = f"({ids[-1]}"
        if len(ids) < batch:
            return Page(items, None)
        if scanned >= _SCAN_BUDGET or time.monotonic() >= deadline:
            # A budget ran out: hand back a cursor so the caller keeps paging.
            return Page(items, upper[1:])


async def _from_event(
    redis: Redis, store: DeliveryStore, query: DeliveryFilter, limit: int, cursor: str | None
) -> Page[DeliveryRecord]:
    """An event names its own deliveries: read them, no index needed."""
    event_id = query.event_id or ""
    dlvs = cast(str | None, await redis.hget(keys.event(event_id), "dlvs"))
    # A delivery id carries its creation time: the event's, or a replay's.
    ids = sorted(
        (d for d in event_deliveries(event_id, dlvs) if query.covers(id_time_ms(d))),
        reverse=True,
    )
    if cursor:
        ids = [d for d in ids if d < cursor]
    items: list[DeliveryRecord] = []
    for start in range(0, len(ids), 200):
        for record in await store.get_many(ids[start : start + 200]):
            if query.matches(record):
                items.append(record)
                if len(items) == limit:
                    return Page(items, record.id)
    return Page(items, None)
