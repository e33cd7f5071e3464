"""Retention on the log, on SQLite and on PostgreSQL: what was made before the cutoff goes
(whole day partitions dropped on PostgreSQL, bounded deletes elsewhere), what is newer
stays, a pending delivery holds the cutoff back until it finishes, and one pass is bounded.
Rows are written as the shipper writes them (``writer.write``), at chosen times."""

from __future__ import annotations

import itertools
import logging

import pytest
import redis
import sqlalchemy as sa

from tests.support.stack import settings_of
from webhook_service.history import partitions, retention, tables, writer
from webhook_service.history.records import EventLogged, NewDelivery, Record, StateLogged
from webhook_service.history.shipper import Shipper
from webhook_service.ids import delivery_id, new_id
from webhook_service.store.deliveries import Attempt
from webhook_service.timeutil import now_ms

pytestmark = [pytest.mark.integration, pytest.mark.both_logs]

DAY = partitions.DAY_MS
RETENTION_DAYS = 30
ENDPOINT = new_id("ep")
_seq = itertools.count(1)


def _sent(at: int, *, finished: bool = True) -> tuple[str, list[Record]]:
    """An event made at ``at`` with one delivery, tried once and succeeded (or pending)."""
    event_id = new_id("msg", at)
    dlv = delivery_id(event_id, ENDPOINT)
    made: list[Record] = [
        EventLogged(next(_seq), event_id, "kept.or.not", at, "key_1", None, "{}",
                    (NewDelivery(dlv, ENDPOINT, "pending"),)),
    ]  # fmt: skip
    if finished:
        made.append(_succeeded(dlv, at + 1000))
    return event_id, made


def _succeeded(dlv: str, at: int) -> StateLogged:
    attempt = Attempt(1, at, 5, 200, None, "ok", {}, {})
    return StateLogged(next(_seq), dlv, "succeeded", 1, at, None, 200, None, "2xx", attempt)


def _write(engine: sa.Engine, batch: list[Record]) -> None:
    with engine.begin() as conn:
        writer.write(conn, batch)


def _events(engine: sa.Engine) -> set[str]:
    with engine.connect() as conn:
        return set(conn.execute(sa.select(tables.events.c.id)).scalars())


def _counts(engine: sa.Engine) -> list[int]:
    with engine.connect() as conn:
        return [
            conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one()
            for t in (tables.events, tables.deliveries, tables.attempts)
        ]


def _days_back(engine: sa.Engine, now: int, days: int) -> None:
    """Day partitions from ``days`` ago (upgrade makes today's on): old rows in their days."""
    with engine.begin() as conn:
        partitions.ensure(conn, now, since_ms=now - days * DAY)


async def test_old_rows_go_and_recent_ones_stay(log_engine: sa.Engine) -> None:
    now = now_ms()
    # 40 days ago has no partition of its own on PostgreSQL: its rows are in DEFAULT.
    _days_back(log_engine, now, 35)
    old, kept = set(), set()
    for days in (40, 35, 31):
        event_id, batch = _sent(now - days * DAY)
        _write(log_engine, batch)
        old.add(event_id)
    for days in (29, 1, 0):
        event_id, batch = _sent(now - days * DAY)
        _write(log_engine, batch)
        kept.add(event_id)
    assert _counts(log_engine) == [6, 6, 6]

    pruned = retention.prune(log_engine, now, RETENTION_DAYS)

    assert _events(log_engine) == kept and _counts(log_engine) == [3, 3, 3]
    assert pruned.cutoff_ms == retention.cutoff_ms(now, RETENTION_DAYS) and not pruned.more
    if log_engine.dialect.name == "postgresql":
        # Every day wholly before the cutoff dropped (35 down to 31 days ago, three tables);
        # the DEFAULT partition's rows deleted.
        assert (pruned.partitions, pruned.rows) == (5 * 3, 3)
        with log_engine.connect() as conn:
            left = [p.day for p in partitions.day_partitions(conn, "deliveries")]
        assert left[0] == partitions.day_of(pruned.cutoff_ms)
    else:
        assert (pruned.partitions, pruned.rows) == (0, 9)
    # Nothing more to do: a second pass changes nothing.
    assert retention.prune(log_engine, now, RETENTION_DAYS).rows == 0


async def test_a_pending_delivery_holds_retention_back_until_it_finishes(
    log_engine: sa.Engine, sync_redis: redis.Redis
) -> None:
    now = now_ms()
    _days_back(log_engine, now, 41)
    gone_event, batch = _sent(now - 40 * DAY)
    _write(log_engine, batch)
    pending_event, batch = _sent(now - 35 * DAY, finished=False)
    _write(log_engine, batch)
    newer_event, batch = _sent(now - 33 * DAY)
    _write(log_engine, batch)
    # Pending at more than twice the retention: taken for lost, it holds nothing back
    # (on PostgreSQL in the DEFAULT partition: no day was made for it).
    lost_event, batch = _sent(now - 70 * DAY, finished=False)
    _write(log_engine, batch)

    pruned = retention.prune(log_engine, now, RETENTION_DAYS)
    assert pruned.cutoff_ms == now - 35 * DAY
    assert _events(log_engine) == {pending_event, newer_event}

    # Finished, it lets go: the shipper's upkeep runs the pass, as between its batches.
    _write(log_engine, [_succeeded(delivery_id(pending_event, ENDPOINT), now)])
    settings = settings_of({"WEBHOOK_RETENTION_DAYS": str(RETENTION_DAYS)})
    Shipper(sync_redis, log_engine, settings).upkeep()
    assert _events(log_engine) == set()
    assert gone_event and lost_event  # named for the reader: both went in the first pass


async def test_one_pass_deletes_a_bounded_number_of_rows(
    log_engine: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite's batches, and PostgreSQL's DEFAULT partition (no day made for these rows)."""
    monkeypatch.setattr(retention, "ROWS_PER_STATEMENT", 10)
    now = now_ms()
    batch: list[Record] = []
    for n in range(25):
        batch += _sent(now - 50 * DAY + n)[1]
    _write(log_engine, batch)

    # Four statements of at most ten rows a pass, each table's last one finding it done:
    # attempts 10, 10, 5 and deliveries 10; attempts 0, deliveries 10, 5 and events 10;
    # attempts 0, deliveries 0, events 10, 5.
    passes = [retention.prune(log_engine, now, RETENTION_DAYS) for _ in range(3)]
    assert [(p.rows, p.more) for p in passes] == [(35, True), (25, True), (15, False)]
    assert _counts(log_engine) == [0, 0, 0]


async def test_partitions_are_made_ahead_once_and_a_day_taken_by_default_is_passed_over(
    log_engine: sa.Engine, caplog: pytest.LogCaptureFixture
) -> None:
    now = now_ms()
    with log_engine.begin() as conn:
        # upgrade made today's and the days ahead: nothing left to make.
        assert partitions.ensure(conn, now) == 0
    if log_engine.dialect.name != "postgresql":
        return  # SQLite has no partitions
    with log_engine.connect() as conn:
        days = [p.day for p in partitions.day_partitions(conn, "events")]
    assert days[0] == partitions.day_of(now) and len(days) == partitions.DAYS_AHEAD + 1
    # A row of a day no partition covers lands in DEFAULT; that day can no longer be made,
    # and the days around it still are.
    _write(log_engine, _sent(now - 3 * DAY)[1])
    with caplog.at_level(logging.WARNING), log_engine.begin() as conn:
        made = partitions.ensure(conn, now, since_ms=now - 4 * DAY)
    assert made == 3 * 4 - 3  # four days back, three tables, less the day taken
    assert "events_default" in caplog.text
    with log_engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM events_default")).scalar_one() == 1
