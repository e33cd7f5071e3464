"""PostgreSQL's day partitions of the log: one per UTC day of ``created_ms`` and table.

Retention drops a whole day at once (``retention.py``: DROP TABLE, O(1) however many rows),
so each big table is ``PARTITION BY RANGE (created_ms)`` (migrations/versions/0001_log.py)
and its days are made ahead of time: at ``upgrade`` and then about once an hour by the
shipper, today and the next ``DAYS_AHEAD`` days, so a day's first write never waits for
one. A DEFAULT partition takes any row no day partition covers (a clock far ahead, history
migrated from before the log), so a write never fails for want of a partition; retention
deletes from it in bounded batches.

A day cannot be made once the DEFAULT partition holds rows of it (PostgreSQL checks, and
refuses): that day's rows then stay in the DEFAULT partition, and ``ensure`` moves on. SQLite
has no partitions; everything here is a no-op there.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

import sqlalchemy as sa

log = logging.getLogger(__name__)

PARTITIONED = ("events", "deliveries", "attempts")
DAY_MS = 86_400_000
# Days made ahead of today: the shipper may be away a while (a restart, an outage) and a
# day's first rows still find their partition.
DAYS_AHEAD = 3
# Making a partition locks its parent (ACCESS EXCLUSIVE) for a moment; rather than queue
# every reader behind a long one, give up and try again at the next upkeep.
_LOCK_TIMEOUT = "2s"
_DAY_NAME = re.compile(r"_p(\d{8})$")


def default_partition(table: str) -> str:
    return f"{table}_default"


def day_partition(table: str, day: date) -> str:
    return f"{table}_p{day:%Y%m%d}"


def day_of(ms: int) -> date:
    return datetime.fromtimestamp(ms / 1000, UTC).date()


def day_start_ms(day: date) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() * 1000)


@dataclass(frozen=True)
class DayPartition:
    table: str
    name: str
    day: date

    @property
    def end_ms(self) -> int:
        """The first ms past this day: every row here has ``created_ms`` below it."""
        return day_start_ms(self.day) + DAY_MS


def day_partitions(conn: sa.Connection, table: str) -> list[DayPartition]:
    """The day partitions of ``table`` as they stand, oldest first (DEFAULT left out)."""
    names = conn.execute(
        sa.text(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = to_regclass(:table)"
        ),
        {"table": table},
    ).scalars()
    found = []
    for name in names:
        if (match := _DAY_NAME.search(name)) is not None:
            day = datetime.strptime(match.group(1), "%Y%m%d").replace(tzinfo=UTC).date()
            found.append(DayPartition(table, name, day))
    return sorted(found, key=lambda p: p.day)


def ensure(conn: sa.Connection, now_ms: int, *, since_ms: int | None = None) -> int:
    """Make the day partitions missing from ``since_ms``'s day (default: today) to
    ``DAYS_AHEAD`` days after today, in the caller's transaction: how many were made."""
    if conn.dialect.name != "postgresql":
        return 0
    first, last = day_of(now_ms if since_ms is None else since_ms), day_of(now_ms)
    days = [first + timedelta(n) for n in range((last - first).days + DAYS_AHEAD + 1)]
    made = 0
    for table in PARTITIONED:
        have = {p.day for p in day_partitions(conn, table)}
        for day in days:
            if day not in have and _make(conn, table, day):
                made += 1
    return made


def _make(conn: sa.Connection, table: str, day: date) -> bool:
    start = day_start_ms(day)
    name = day_partition(table, day)
    try:
        # A savepoint each: one refusal leaves the others, and the caller's transaction, whole.
        with conn.begin_nested():
            conn.execute(sa.text(f"SET LOCAL lock_timeout = '{_LOCK_TIMEOUT}'"))
            conn.execute(
                sa.text(
                    f'CREATE TABLE IF NOT EXISTS "{name}" PARTITION OF "{table}" '
                    f"FOR VALUES FROM ({start}) TO ({start + DAY_MS})"
                )
            )
    except sa.exc.DBAPIError as exc:
        # The DEFAULT partition holds rows of that day, or the lock was not to be had.
        log.warning(
            "log partition %s not made (%s); its rows stay in %s",
            name,
            str(exc.orig).splitlines()[0][:200],
            default_partition(table),
        )
        return False
    return True
