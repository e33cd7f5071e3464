"""Retention on the log: what was made more than ``WEBHOOK_RETENTION_DAYS`` ago goes.

PostgreSQL drops each day partition wholly older than the cutoff (``DROP TABLE``: O(1)
however many rows; a plain drop, as ``DETACH … CONCURRENTLY`` is refused beside a DEFAULT
partition and a plain detach takes the same lock), and deletes from the DEFAULT partitions
like SQLite. SQLite deletes in bounded batches, ``ROWS_PER_STATEMENT`` rows a statement, each
its own transaction, at most ``STATEMENTS_PER_PASS`` a pass: the shipper, the one writer,
is never held up long, and readers are never blocked (WAL). Old rows are found by id, which
sorts by time (ids.py): the primary keys serve the search, no extra index.

A pending delivery is never dropped, nor anything made after it: the cutoff stops at the
oldest delivery the log holds as pending. A delivery stays pending for its retry schedule
(about a day by default) and the log's lag behind Redis, so this holds retention back by
about that. One still pending at twice the retention age is taken for lost (Redis lost the
last second of its writes to a power cut after the log had them) and holds nothing back.

The shipper runs a pass between batches (``shipper.py``), the tick after its own shipping.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import sqlalchemy as sa

from webhook_service.history import partitions, tables
from webhook_service.ids import id_bound, id_time_ms
from webhook_service.store.states import LIVE_STATUSES

log = logging.getLogger(__name__)

DAY_MS = partitions.DAY_MS
# One statement deletes at most this many rows: tens of milliseconds of SQLite's write lock.
ROWS_PER_STATEMENT = 5000
STATEMENTS_PER_PASS = 4
# Day partitions one pass drops at most (a drop is cheap; this only bounds a pass).
DROPS_PER_PASS = 30
_LOCK_TIMEOUT = "2s"


@dataclass(frozen=True)
class _Old:
    """How a table's old rows are found: the key columns, the first of them an id of
    ``prefix`` (a delivery's for attempts), and that id's bound at the cutoff."""

    table: str
    key: tuple[str, ...]
    prefix: str


# Attempts, then deliveries, then their events: a pass cut short leaves no attempt whose
# delivery has gone.
_OLD = (
    _Old("attempts", ("delivery_id", "number", "created_ms"), "dlv"),
    _Old("deliveries", ("id", "created_ms"), "dlv"),
    _Old("events", ("id", "created_ms"), "msg"),
)


@dataclass(frozen=True)
class Pruned:
    partitions: int  # day partitions dropped (PostgreSQL)
    rows: int  # rows deleted (SQLite; PostgreSQL's DEFAULT partitions)
    cutoff_ms: int  # what was made before this went (the oldest pending delivery stops it)
    more: bool  # a budget was spent: old rows may be left for the next pass


def cutoff_ms(now_ms: int, retention_days: float) -> int:
    return now_ms - int(retention_days * DAY_MS)


def _held_back(conn: sa.Connection, cutoff: int, lost_before: int) -> int:
    """The cutoff, moved back to the oldest delivery still pending (unless it is lost)."""
    d = tables.deliveries.c
    oldest = conn.execute(
        sa.select(sa.func.min(d.id)).where(
            d.status.in_(LIVE_STATUSES),
            d.id >= id_bound("dlv", lost_before, upper=False),
            d.id < id_bound("dlv", cutoff, upper=False),
        )
    ).scalar_one_or_none()
    return cutoff if oldest is None else min(cutoff, id_time_ms(oldest))


def _delete_batch(conn: sa.Connection, old: _Old, name: str, cutoff: int) -> int:
    table = sa.table(name, *(sa.column(c) for c in old.key))
    key = [table.c[c] for c in old.key]
    found = (
        sa.select(*key)
        .where(key[0] < id_bound(old.prefix, cutoff, upper=False))
        .limit(ROWS_PER_STATEMENT)
    )
    return conn.execute(sa.delete(table).where(sa.tuple_(*key).in_(found))).rowcount


def _delete_old(engine: sa.Engine, cutoff: int, *, defaults: bool) -> tuple[int, bool]:
    """Bounded deletes from each table (or each DEFAULT partition): rows, budget spent."""
    deleted, statements = 0, 0
    for old in _OLD:
        name = partitions.default_partition(old.table) if defaults else old.table
        while statements < STATEMENTS_PER_PASS:
            statements += 1
            with engine.begin() as conn:
                n = _delete_batch(conn, old, name, cutoff)
            deleted += n
            if n < ROWS_PER_STATEMENT:
                break
        else:
            return deleted, True
    return deleted, False


def _drop_days(engine: sa.Engine, cutoff: int) -> tuple[int, bool]:
    dropped = 0
    with engine.connect() as conn:
        old = [
            p
            for old in _OLD
            for p in partitions.day_partitions(conn, old.table)
            if p.end_ms <= cutoff
        ]
    # The oldest days first, each whole (its attempts, deliveries, events) before the next.
    order = {old.table: n for n, old in enumerate(_OLD)}
    old.sort(key=lambda p: (p.day, order[p.table]))
    for partition in old[:DROPS_PER_PASS]:
        try:
            with engine.begin() as conn:
                # Dropping a partition locks its parent: never queue readers behind a long one.
                conn.execute(sa.text(f"SET LOCAL lock_timeout = '{_LOCK_TIMEOUT}'"))
                conn.execute(sa.text(f'DROP TABLE IF EXISTS "{partition.name}"'))
        except sa.exc.OperationalError as exc:
            log.info("log partition %s not dropped yet (%s)", partition.name, exc.orig)
            return dropped, True
        dropped += 1
    return dropped, len(old) > DROPS_PER_PASS


def prune(engine: sa.Engine, now_ms: int, retention_days: float) -> Pruned:
    """One bounded pass of retention."""
    cutoff = cutoff_ms(now_ms, retention_days)
    with engine.connect() as conn:
        cutoff = _held_back(conn, cutoff, cutoff_ms(now_ms, 2 * retention_days))
    if engine.dialect.name != "postgresql":
        rows, more = _delete_old(engine, cutoff, defaults=False)
        return Pruned(0, rows, cutoff, more)
    dropped, more_days = _drop_days(engine, cutoff)
    rows, more_rows = _delete_old(engine, cutoff, defaults=True)
    return Pruned(dropped, rows, cutoff, more_days or more_rows)
