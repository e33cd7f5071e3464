"""The history's SQL, built here and run by ``reader.py``.

A list walks one index of the log newest first. Each index is its filter's columns then the
id (migrations/versions/0001_log.py and 0002_applications.py), so ``WHERE col = ? AND
id < cursor ORDER BY id DESC LIMIT n`` reads n entries wherever the cursor is: a page costs
its own length, not the history's. A list's filters pick the index (``delivery_scan``);
filters it does not hold are left to the reader, which applies them to what it reads,
within a bound. Left in the query, they would let the database choose an index that matches
everything and then sort every match (SQLite does, for an attempt-count range), or walk one
index unbounded.

Ids sort by creation time, so a time range is an id range (``ids.id_bound``). It bounds
``created_ms`` too, the time in the id: PostgreSQL then reads only the day partitions that
can hold the rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from webhook_service.history import tables
from webhook_service.history.filters import DeliveryFilter, EventFilter, TimeRange
from webhook_service.ids import id_bound

_d, _e, _a = tables.deliveries, tables.events, tables.attempts

# A query of several columns; its rows are read by column name, which SQLAlchemy's types
# do not follow (they type a row by position).
Rows = sa.Select[*tuple[Any, ...]]

DELIVERY_COLUMNS = (
    _d.c.id, _d.c.event_id, _d.c.endpoint_id, _d.c.event_type, _d.c.status, _d.c.attempts,
    _d.c.next_at_ms, _d.c.created_ms, _d.c.updated_ms, _d.c.last_code, _d.c.last_error,
    _d.c.last_class, _d.c.application,
)  # fmt: skip

# The filters an index answers, its columns in order, and its name. Tried in this order:
# the first whose filters are all set walks. The order guesses at how few rows each holds:
# an event has a few deliveries, an endpoint a share, a type a smaller share than a status
# or a class (four and six values). The log keeps no counts to tell better: counting is
# what a page must not do. An application comes before the filters every application's
# rows share (a type, a status...): a page of one application's then reads its own rows
# alone, however many the others have.
_DELIVERY_INDEXES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("event_id",), "deliveries_by_event"),
    (("endpoint_id", "status"), "deliveries_by_endpoint_status"),
    (("endpoint_id", "status_class"), "deliveries_by_endpoint_class"),
    (("endpoint_id",), "deliveries_by_endpoint"),
    (("application",), "deliveries_by_application"),
    (("event_type",), "deliveries_by_type"),
    (("status",), "deliveries_by_status"),
    (("status_class",), "deliveries_by_class"),
    (("attempts",), "deliveries_by_attempts"),
)
_DELIVERY_COLUMN = {
    "event_id": _d.c.event_id,
    "endpoint_id": _d.c.endpoint_id,
    "status": _d.c.status,
    "status_class": _d.c.last_class,
    "event_type": _d.c.event_type,
    "attempts": _d.c.attempts,
    "application": _d.c.application,
}
# An event, and an endpoint, are one application's: walking their index, the application
# filter keeps every row read or none, so it leaves the walk as exact as it was.
_ONE_APPLICATION = frozenset({"event_id", "endpoint_id"})


@dataclass(frozen=True)
class Scan:
    """The index a list of deliveries walks, what it is asked for, and whether that is every
    filter (each row read is then a match) or some are left to the reader."""

    index: str
    equal: tuple[tuple[str, str | int], ...]  # (filter, value), in the index's order
    exact: bool


def _set_filters(query: DeliveryFilter) -> dict[str, str | int]:
    """The filters given, as the indexes name them; an attempt count is one only when the
    range is one number (a range is never walked: see the module's docstring)."""
    given: dict[str, str | int | None] = {
        "event_id": query.event_id,
        "endpoint_id": query.endpoint_id,
        "status": query.status,
        "status_class": query.status_class,
        "event_type": query.event_type,
        "attempts": query.attempts_min if query.attempts_min == query.attempts_max else None,
        "application": query.application,
    }
    return {name: value for name, value in given.items() if value is not None}


def delivery_scan(query: DeliveryFilter) -> Scan:
    given = _set_filters(query)
    ranged = query.attempts_min != query.attempts_max
    for names, index in _DELIVERY_INDEXES:
        if all(name in given for name in names):
            left = set(given) - set(names)
            if _ONE_APPLICATION & set(names):
                left.discard("application")
            return Scan(index, tuple((n, given[n]) for n in names), not ranged and not left)
    return Scan("deliveries_pkey", (), not ranged and not given)


def _time_bounds(
    id_column: sa.ColumnElement[str],
    created: sa.ColumnElement[int],
    prefix: str,
    window: TimeRange,
    before: str | None,
) -> list[sa.ColumnElement[bool]]:
    where: list[sa.ColumnElement[bool]] = []
    if before is not None:
        where.append(id_column < before)
    if window.since_ms is not None:
        where += [
            id_column >= id_bound(prefix, window.since_ms, upper=False),
            created >= window.since_ms,
        ]
    if window.until_ms is not None:
        # Past the largest id of that millisecond: a delivery id runs on after it.
        where += [
            id_column <= id_bound(prefix, window.until_ms, upper=True) + "~",
            created <= window.until_ms,
        ]
    return where


def deliveries_page(query: DeliveryFilter, scan: Scan, before: str | None, limit: int) -> Rows:
    """The next ``limit`` rows of the scan's index below ``before``, newest first."""
    where = [_DELIVERY_COLUMN[name] == value for name, value in scan.equal]
    where += _time_bounds(_d.c.id, _d.c.created_ms, "dlv", query, before)
    return sa.select(*DELIVERY_COLUMNS).where(*where).order_by(_d.c.id.desc()).limit(limit)


def deliveries_by_id(ids: Sequence[str]) -> Rows:
    return sa.select(*DELIVERY_COLUMNS).where(_d.c.id.in_(ids))


def attempts_of(delivery_id: str) -> Rows:
    return (
        sa.select(
            _a.c.number, _a.c.created_ms, _a.c.duration_ms, _a.c.status_code, _a.c.error,
            _a.c.response_body, _a.c.request_headers, _a.c.response_headers,
        )
        .where(_a.c.delivery_id == delivery_id)
        .order_by(_a.c.number)
    )  # fmt: skip


_EVENT_COLUMNS = (
    _e.c.id, _e.c.type, _e.c.created_ms, _e.c.key_id, _e.c.expunged_ms, _e.c.application,
    _e.c.channels, _e.c.example, _e.c.deliver_at_ms,
)  # fmt: skip


def event_index(query: EventFilter) -> str:
    """Every combination of the event filters has an index (its filters' columns, in this
    order, then the id): a page of events reads only its matches."""
    given = [
        name
        for name, value in (
            ("application", query.application), ("key", query.key_id), ("type", query.event_type)
        )
        if value is not None
    ]  # fmt: skip
    return "events_by_" + "_".join(given) if given else "events_pkey"


def events_page(query: EventFilter, before: str | None, limit: int) -> Rows:
    """A page of events, each with how many deliveries it has: counted in the same query,
    for the rows of the page only (from deliveries_by_event)."""
    where = _time_bounds(_e.c.id, _e.c.created_ms, "msg", query, before)
    if query.event_type is not None:
        where.append(_e.c.type == query.event_type)
    if query.key_id is not None:
        where.append(_e.c.key_id == query.key_id)
    if query.application is not None:
        where.append(_e.c.application == query.application)
    count = (
        sa.select(sa.func.count())
        .select_from(_d)
        .where(_d.c.event_id == _e.c.id)
        .scalar_subquery()
        .label("deliveries")
    )
    return sa.select(*_EVENT_COLUMNS, count).where(*where).order_by(_e.c.id.desc()).limit(limit)


def event_by_id(event_id: str) -> Rows:
    return sa.select(*_EVENT_COLUMNS, _e.c.body).where(_e.c.id == event_id)


def delivery_ids_of_event(event_id: str) -> sa.Select[str]:
    return sa.select(_d.c.id).where(_d.c.event_id == event_id).order_by(_d.c.id)
