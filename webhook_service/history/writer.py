"""Writing one batch of outbox records in one transaction, so that writing it twice changes
nothing: rows are inserted once (a conflict on the id leaves the row), and a delivery's
state is updated only by a record newer than the one it holds (``log_seq``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from webhook_service.history import tables
from webhook_service.history.records import (
    EventLogged,
    ExpungeLogged,
    NewDelivery,
    Record,
    ReplayLogged,
    StateLogged,
)
from webhook_service.ids import id_time_ms
from webhook_service.store.deliveries import Attempt

Row = dict[str, Any]


def _insert_ignoring_conflicts(dialect: str) -> Callable[[sa.Table], Any]:
    """INSERT … ON CONFLICT DO NOTHING, in the dialect's own words."""
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    return lambda table: insert(table).on_conflict_do_nothing()


def event_row(
    event_id: str,
    event_type: str,
    key_id: str,
    idempotency_key: str | None,
    body: str | None,
    *,
    application: str | None,
    channels: Sequence[str] = (),
    expunged_ms: int | None = None,
    example: bool = False,
    deliver_at_ms: int | None = None,
) -> Row:
    return {
        "id": event_id,
        "created_ms": id_time_ms(event_id),
        "type": event_type,
        "key_id": key_id,
        "idempotency_key": idempotency_key,
        "body": body,
        "expunged_ms": expunged_ms,
        "application": application,
        "channels": list(channels) or None,
        "example": True if example else None,
        "deliver_at_ms": deliver_at_ms,
    }


def attempt_row(delivery_id: str, a: Attempt) -> Row:
    return {
        "delivery_id": delivery_id,
        "number": a.number,
        "created_ms": a.started_ms,
        "duration_ms": a.duration_ms,
        "status_code": a.status_code,
        "error": a.error,
        "response_body": a.response_body,
        "request_headers": a.request_headers,
        "response_headers": a.response_headers,
    }


def _new_delivery(
    seq: int,
    event_id: str,
    event_type: str,
    application: str | None,
    created_ms: int,
    d: NewDelivery,
    deliver_at_ms: int | None = None,
) -> Row:
    return {
        "id": d.id,
        "created_ms": id_time_ms(d.id),
        "event_id": event_id,
        "endpoint_id": d.endpoint_id,
        "event_type": event_type,
        "status": d.status,
        "attempts": 0,
        "updated_ms": created_ms,
        "next_at_ms": {"pending": created_ms, "scheduled": deliver_at_ms}.get(d.status),
        "log_seq": seq,
        "application": application,
    }


_STATE = (
    sa.update(tables.deliveries)
    .where(
        tables.deliveries.c.id == sa.bindparam("b_id"),
        tables.deliveries.c.created_ms == sa.bindparam("b_created"),
        tables.deliveries.c.log_seq < sa.bindparam("b_seq"),
    )
    .values(
        status=sa.bindparam("b_status"),
        attempts=sa.bindparam("b_attempts"),
        updated_ms=sa.bindparam("b_updated"),
        next_at_ms=sa.bindparam("b_next_at"),
        last_code=sa.bindparam("b_code"),
        last_error=sa.bindparam("b_error"),
        last_class=sa.bindparam("b_class"),
        log_seq=sa.bindparam("b_seq"),
    )
)

_EXPUNGE = (
    sa.update(tables.events)
    .where(
        tables.events.c.id == sa.bindparam("b_id"),
        tables.events.c.created_ms == sa.bindparam("b_created"),
        tables.events.c.expunged_ms.is_(None),
    )
    .values(body=None, expunged_ms=sa.bindparam("b_at"))
)


def write(conn: sa.Connection, records: Sequence[Record]) -> None:
    """Every record of the batch, in the caller's transaction. Inserts go first: a state
    change always follows the record that made its delivery, in the stream and here."""
    events: list[Row] = []
    deliveries: list[Row] = []
    attempts: list[Row] = []
    states: list[Row] = []
    expunges: list[Row] = []
    for record in records:
        if isinstance(record, EventLogged):
            events.append(
                event_row(
                    record.id,
                    record.type,
                    record.key_id,
                    record.idempotency_key,
                    record.body,
                    application=record.application,
                    channels=record.channels,
                    example=record.example,
                    deliver_at_ms=record.deliver_at_ms,
                )
            )
            deliveries += (
                _new_delivery(
                    record.seq,
                    record.id,
                    record.type,
                    record.application,
                    record.created_ms,
                    d,
                    record.deliver_at_ms,
                )
                for d in record.deliveries
            )
        elif isinstance(record, ReplayLogged):
            deliveries += (
                _new_delivery(
                    record.seq,
                    record.event_id,
                    record.event_type,
                    record.application,
                    record.created_ms,
                    d,
                )
                for d in record.deliveries
            )
        elif isinstance(record, StateLogged):
            states.append(
                {
                    "b_id": record.delivery_id,
                    "b_created": id_time_ms(record.delivery_id),
                    "b_seq": record.seq,
                    "b_status": record.status,
                    "b_attempts": record.attempts,
                    "b_updated": record.updated_ms,
                    "b_next_at": record.next_at_ms,
                    "b_code": record.last_code,
                    "b_error": record.last_error,
                    "b_class": record.last_class,
                }
            )
            if record.attempt is not None:
                attempts.append(attempt_row(record.delivery_id, record.attempt))
        elif isinstance(record, ExpungeLogged):
            expunges.append(
                {
                    "b_id": record.event_id,
                    "b_created": id_time_ms(record.event_id),
                    "b_at": record.at_ms,
                }
            )
    write_rows(conn, events, deliveries, attempts)
    # One statement per state, in stream order: executemany keeps the order it is given.
    if states:
        conn.execute(_STATE, states)
    if expunges:
        conn.execute(_EXPUNGE, expunges)


def write_rows(
    conn: sa.Connection, events: Sequence[Row], deliveries: Sequence[Row], attempts: Sequence[Row]
) -> None:
    """Rows inserted once, in the caller's transaction: a row already there (same key) is
    left as it is. Each sequence's rows have the same columns (one executemany)."""
    insert = _insert_ignoring_conflicts(conn.dialect.name)
    for table, rows in (
        (tables.events, events),
        (tables.deliveries, deliveries),
        (tables.attempts, attempts),
    ):
        if rows:
            conn.execute(insert(table), rows)
