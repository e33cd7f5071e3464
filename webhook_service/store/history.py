"""Delivery history pages: newest first, by id, from the most selective index.

Ids sort by time, so a time range is an id range and a cursor is the last id seen: paging
never scans what it has already returned. Filters the chosen index does not cover are
applied while reading, with a bound on how much one page may read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from redis.asyncio import Redis

from webhook_service.ids import id_bound, id_time_ms
from webhook_service.store import keys
from webhook_service.store.deliveries import DeliveryRecord, DeliveryStore

# How many index entries one page may examine before it returns what it has and a cursor.
_SCAN_BUDGET = 5000


@dataclass(frozen=True)
class DeliveryFilter:
    endpoint_id: str | None = None
    event_id: str | None = None
    status: str | None = None
    event_type: str | None = None
    since_ms: int | None = None
    until_ms: int | None = None

    def matches(self, record: DeliveryRecord) -> bool:
        return (
            (self.endpoint_id is None or record.endpoint_id == self.endpoint_id)
            and (self.event_id is None or record.event_id == self.event_id)
            and (self.status is None or record.status == self.status)
            and (self.event_type is None or record.event_type == self.event_type)
        )

    def index(self) -> str:
        if self.endpoint_id is not None:
            return keys.deliveries_by_endpoint(self.endpoint_id)
        if self.status is not None:
            return keys.deliveries_by_status(self.status)
        if self.event_type is not None:
            return keys.deliveries_by_type(self.event_type)
        return keys.DELIVERIES_INDEX


@dataclass(frozen=True)
class Page:
    items: list[DeliveryRecord]
    next_cursor: str | None


async def list_deliveries(
    redis: Redis, store: DeliveryStore, query: DeliveryFilter, limit: int, cursor: str | None
) -> Page:
    if query.event_id is not None:
        return await _from_event(redis, store, query, limit, cursor)
    upper = "+"
    if query.until_ms is not None:
        upper = "[" + id_bound("dlv", query.until_ms, upper=True) + "~"
    if cursor and (upper == "+" or cursor < upper[1:]):
        upper = "(" + cursor
    lower = "[" + id_bound("dlv", query.since_ms, upper=False) if query.since_ms else "-"
    items: list[DeliveryRecord] = []
    scanned = 0
    index = query.index()
    while len(items) < limit and scanned < _SCAN_BUDGET:
        batch = min(max(limit * 2, 50), _SCAN_BUDGET - scanned)
        ids = cast(list[str], await redis.zrevrangebylex(index, upper, lower, start=0, num=batch))
        if not ids:
            return Page(items, None)
        scanned += len(ids)
        for record in await store.get_many(ids):
            if query.matches(record):
                items.append(record)
                if len(items) == limit:
                    return Page(items, record.id)
        upper = f"({ids[-1]}"
        if len(ids) < batch:
            return Page(items, None)
    # The scan budget ran out: hand back a cursor so the caller keeps paging.
    return Page(items, upper[1:])


async def _from_event(
    redis: Redis, store: DeliveryStore, query: DeliveryFilter, limit: int, cursor: str | None
) -> Page:
    """An event names its own deliveries: read them, no index needed."""
    dlvs = cast(str | None, await redis.hget(keys.event(query.event_id or ""), "dlvs"))
    ids = sorted((d for d in (dlvs or "").split(",") if d), reverse=True)
    # An event's deliveries share its time: the range keeps all of them or none.
    event_ms = id_time_ms(query.event_id or "")
    if (query.since_ms is not None and event_ms < query.since_ms) or (
        query.until_ms is not None and event_ms > query.until_ms
    ):
        return Page([], None)
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
