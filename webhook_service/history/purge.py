"""Deleting a deleted application's history from the log, in bounded batches.

A batch is one transaction: up to ``ROWS_PER_BATCH`` of the application's deliveries with
their attempts (attempts first, so that none ever outlives its delivery, as in
``retention.py``), or, once no delivery is left, up to that many of its events. Each is
found by the ``(application, id)`` index the 0002 migration made, and deleted by its full
key, so that PostgreSQL prunes the day partitions it does not touch. A batch holds SQLite's
write lock for tens of milliseconds: the shipper, the one other writer, is never held up
long, and readers never wait (WAL). A batch run twice deletes nothing twice: what is gone
is not found again, so a job cut short goes on from wherever it stopped.

Only once the log holds every record about the application (api/jobs.py waits for the
outbox to be shipped past them): a record shipped after its rows went would write them back.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from webhook_service.history import tables
from webhook_service.history.reader import LogUnavailable

ROWS_PER_BATCH = 500


@dataclass(frozen=True)
class Purged:
    events: int
    deliveries: int
    attempts: int

    @property
    def done(self) -> bool:
        """Nothing was left to delete: the application has no history in the log."""
        return not (self.events or self.deliveries)


async def _deliveries(conn: AsyncConnection, application: str, limit: int) -> Purged:
    d, a = tables.deliveries.c, tables.attempts.c
    rows = (
        await conn.execute(
            sa.select(d.id, d.created_ms).where(d.application == application).limit(limit)
        )
    ).all()
    if not rows:
        return Purged(0, 0, 0)
    ids = [row.id for row in rows]
    attempts = await conn.execute(sa.delete(tables.attempts).where(a.delivery_id.in_(ids)))
    deliveries = await conn.execute(
        sa.delete(tables.deliveries).where(
            d.id.in_(ids), d.created_ms.in_(sorted({row.created_ms for row in rows}))
        )
    )
    return Purged(0, deliveries.rowcount, attempts.rowcount)


async def _events(conn: AsyncConnection, application: str, limit: int) -> Purged:
    e = tables.events.c
    rows = (
        await conn.execute(
            sa.select(e.id, e.created_ms).where(e.application == application).limit(limit)
        )
    ).all()
    if not rows:
        return Purged(0, 0, 0)
    events = await conn.execute(
        sa.delete(tables.events).where(
            e.id.in_([row.id for row in rows]),
            e.created_ms.in_(sorted({row.created_ms for row in rows})),
        )
    )
    return Purged(events.rowcount, 0, 0)


class Purger:
    def __init__(self, engine: AsyncEngine, timeout: float) -> None:
        self._engine = engine
        self._timeout = timeout  # WEBHOOK_LOG_TIMEOUT: over one batch, pool wait included

    async def batch(self, application: str, limit: int = ROWS_PER_BATCH) -> Purged:
        """One batch of the application's history deleted: deliveries (with their
        attempts) while there are any, then events; ``done`` once nothing was left. Raises
        LogUnavailable when the database refuses or takes longer than the timeout."""
        try:
            async with asyncio.timeout(self._timeout), self._engine.begin() as conn:
                purged = await _deliveries(conn, application, limit)
                if purged.done:
                    purged = await _events(conn, application, limit)
                return purged
        except (sa.exc.DBAPIError, sa.exc.TimeoutError, TimeoutError) as exc:
            # As the reader's: the driver's every error, no pooled connection in time, or
            # the whole batch took too long. The job tries the batch again on its next pass.
            raise LogUnavailable(f"{type(exc).__name__}: {exc}".splitlines()[0][:300]) from exc
