"""Reading the history: the SQL log, with Redis for what is still in flight.

- A list is served from SQL (``queries.py``), so it lags the shipper by about
  ``WEBHOOK_LOG_SHIP_INTERVAL``. A row the log still has as pending is shown as Redis has
  it now, if Redis still holds it: a pending delivery shows its latest state (while Redis
  refuses, as the log has it).
- A read by id looks in Redis first, then in SQL: an event just accepted, or a delivery just
  made, is there before the shipper has written it, and is read even while SQL is away.
- Attempts are the log's alone (Redis keeps none).
- A delivery's application is its event's: a record read from Redis gets it from the log's
  row (in a list) or from its event's hash (by id).

Every SQL failure (refused, timed out, a pool with no free connection) is one exception,
``LogUnavailable``: the API answers it with a 503 ``log-unavailable``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import redis.exceptions
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from webhook_service.history import queries
from webhook_service.history.filters import DeliveryFilter, EventFilter, EventSummary, Page
from webhook_service.ids import looks_like
from webhook_service.store.deliveries import Attempt, DeliveryRecord, DeliveryStore
from webhook_service.store.events import EventRecord, EventStore
from webhook_service.store.refusals import refused
from webhook_service.store.states import LIVE_STATUSES

# How many rows one page of deliveries may read, and for how long, when its filters are not
# all held by the index it walks, before it returns what it has and a cursor to go on from:
# filters that rarely meet would otherwise read one index to its end (openapi.yaml says so).
SCAN_BUDGET = 5000
SCAN_SECONDS = 0.025
_FIRST_BATCH = 50


class LogUnavailable(Exception):
    """The log's database did not answer: refused, broken, or too slow."""


def _delivery(row: Any) -> DeliveryRecord:
    """From a row of ``queries.DELIVERY_COLUMNS``, the record's fields in their order: by
    position, since a list may read thousands of rows a page (a field by name costs more
    than the rest of the page; tests/unit/history/test_queries.py checks the order)."""
    return DeliveryRecord(*row)


def _channels(value: list[str] | None) -> tuple[str, ...]:
    return tuple(value) if value else ()


def _attempt(row: Any) -> Attempt:
    return Attempt(
        number=row.number,
        started_ms=row.created_ms,
        duration_ms=row.duration_ms,
        status_code=row.status_code,
        error=row.error,
        response_body=row.response_body,
        request_headers=row.request_headers,
        response_headers=row.response_headers,
    )


class HistoryReader:
    def __init__(
        self, engine: AsyncEngine, deliveries: DeliveryStore, events: EventStore, timeout: float
    ) -> None:
        self._engine = engine
        self._deliveries = deliveries
        self._events = events
        self._timeout = timeout  # WEBHOOK_LOG_TIMEOUT: over every SQL read, pool wait included

    @asynccontextmanager
    async def _sql(self) -> AsyncIterator[AsyncConnection]:
        try:
            async with asyncio.timeout(self._timeout), self._engine.connect() as conn:
                yield conn
        except (sa.exc.DBAPIError, sa.exc.TimeoutError, TimeoutError) as exc:
            # DBAPIError: the driver's every error (refused, reset, locked, a statement
            # timeout); sa.exc.TimeoutError: no pooled connection in time; TimeoutError:
            # the whole read took longer than WEBHOOK_LOG_TIMEOUT.
            raise LogUnavailable(f"{type(exc).__name__}: {exc}".splitlines()[0][:300]) from exc

    async def rows(self, statement: queries.Rows) -> list[Any]:
        """Every row of one read, within WEBHOOK_LOG_TIMEOUT, or LogUnavailable."""
        async with self._sql() as conn:
            return list((await conn.execute(statement)).all())

    async def _latest(self, records: list[DeliveryRecord]) -> list[DeliveryRecord]:
        """The records, each pending one as Redis has it now (if Redis still holds it), with
        the application the log has (Redis's record has none)."""
        pending = [r.id for r in records if r.status in LIVE_STATUSES]
        if not pending:
            return records
        try:
            now = {r.id: r for r in await self._deliveries.get_many(pending)}
        except redis.exceptions.RedisError as exc:
            # While Redis refuses nothing in flight moves on, so the log's state stands: the
            # history stays readable. Any other error is a bug, and raised.
            if not refused(exc, "reading the history"):
                raise
            return records
        return [
            dataclasses.replace(now[r.id], application=r.application) if r.id in now else r
            for r in records
        ]

    async def _with_applications(self, records: list[DeliveryRecord]) -> list[DeliveryRecord]:
        """Records read from Redis, each with its event's application, which the delivery's
        hash does not keep. Redis holds an event as long as a delivery of it (it leaves
        with the last one); were it gone, the record keeps None, which no application's
        filter matches."""
        event_ids = list(dict.fromkeys(r.event_id for r in records))
        events = await asyncio.gather(*map(self._events.get, event_ids))
        applications = {
            event_id: event.application if event is not None else None
            for event_id, event in zip(event_ids, events, strict=True)
        }
        return [dataclasses.replace(r, application=applications[r.event_id]) for r in records]

    async def list_deliveries(
        self, query: DeliveryFilter, limit: int, cursor: str | None
    ) -> Page[DeliveryRecord]:
        scan = queries.delivery_scan(query)
        items: list[DeliveryRecord] = []
        read = 0
        deadline = time.monotonic() + SCAN_SECONDS
        batch = limit if scan.exact else max(limit * 2, _FIRST_BATCH)
        # Each batch is examined whole, so the cursor (its last id) skips nothing; the first
        # always runs, so every page moves on however slow the database is.
        while True:
            rows = await self.rows(queries.deliveries_page(query, scan, cursor, batch))
            read += len(rows)
            # Those that may match are shown in their latest state, which is filtered: a
            # pending one may have moved on.
            maybe = [r for r in map(_delivery, rows) if query.matches_for_good(r)]
            for record in await self._latest(maybe):
                if query.matches(record):
                    items.append(record)
                    if len(items) == limit:
                        return Page(items, record.id)
            if len(rows) < batch:
                return Page(items, None)
            cursor = rows[-1].id
            if read >= SCAN_BUDGET or time.monotonic() >= deadline:
                return Page(items, cursor)
            batch = min(batch * 2, SCAN_BUDGET - read)

    async def list_events(
        self, query: EventFilter, limit: int, cursor: str | None
    ) -> Page[EventSummary]:
        rows = await self.rows(queries.events_page(query, cursor, limit))
        items = [
            EventSummary(
                id=row.id,
                type=row.type,
                created_ms=row.created_ms,
                key_id=row.key_id,
                deliveries=row.deliveries,
                payload_deleted=row.expunged_ms is not None,
                application=row.application,
                channels=_channels(row.channels),
                example=bool(row.example),
                deliver_at_ms=row.deliver_at_ms,
            )
            for row in rows
        ]
        return Page(items, items[-1].id if len(items) == limit else None)

    async def get_delivery(self, delivery_id: str) -> DeliveryRecord | None:
        found = await self.deliveries([delivery_id])
        return found[0] if found else None

    async def deliveries(self, ids: Sequence[str]) -> list[DeliveryRecord]:
        """Those that exist, in the order given: from Redis, the rest from SQL."""
        in_redis = await self._with_applications(await self._deliveries.get_many(ids))
        held = {r.id: r for r in in_redis}
        rest = [d for d in ids if d not in held and looks_like(d, "dlv")]
        if rest:
            held.update(
                (row.id, _delivery(row)) for row in await self.rows(queries.deliveries_by_id(rest))
            )
        return [held[d] for d in ids if d in held]

    async def attempt_log(self, record: DeliveryRecord) -> list[Attempt]:
        """Every attempt the log holds, in order. A delivery not attempted yet needs no
        SQL: it is read even while the log's database is away."""
        if record.attempts == 0:
            return []
        return [_attempt(row) for row in await self.rows(queries.attempts_of(record.id))]

    async def get_event(self, event_id: str) -> EventRecord | None:
        held = await self._events.get(event_id)
        if held is not None:
            return held
        if not looks_like(event_id, "msg"):
            return None
        async with self._sql() as conn:
            row = (await conn.execute(queries.event_by_id(event_id))).first()
            if row is None:
                return None
            ids = (await conn.execute(queries.delivery_ids_of_event(event_id))).scalars().all()
        return EventRecord(
            id=row.id,
            type=row.type,
            created_ms=row.created_ms,
            body=row.body,
            key_id=row.key_id,
            delivery_ids=list(ids),
            application=row.application,
            channels=_channels(row.channels),
            example=bool(row.example),
            deliver_at_ms=row.deliver_at_ms,
        )
