"""The log outboxes' entries (``keys.outbox``, one stream a bucket), as the Lua scripts
write them, parsed.

Each entry has one kind field (``keys.OutboxField``) holding its record as JSON, and may
carry an event's body or an attempt's JSON beside it. The entry's stream id orders every
change of its stream: ``seq`` (the id as one integer) is what a delivery row keeps of the
last change written to it, so a batch shipped twice, or late, never moves a row backwards.
Every change of one delivery is of its bucket's stream, so two seqs compared for a row are
always of one stream; those of two buckets' streams are never compared.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import orjson

from webhook_service.store.deliveries import Attempt
from webhook_service.store.keys import OutboxField
from webhook_service.store.states import FINAL_STATUSES, STATUSES, Status

# A stream id is "<ms>-<n>": as one integer, ms * _SEQ_SPAN + n (n stays far below it).
_SEQ_SPAN = 1_000_000

Entry = tuple[str, Mapping[str, str]]


class MalformedRecord(ValueError):
    """An entry none of our scripts writes: a bug, never data to skip quietly."""


def stream_seq(entry_id: str) -> int:
    ms, _, n = entry_id.partition("-")
    return int(ms) * _SEQ_SPAN + int(n)


@dataclass(frozen=True)
class NewDelivery:
    id: str
    endpoint_id: str
    status: Status


@dataclass(frozen=True)
class EventLogged:
    """An accepted event with its first deliveries (ingest, or an operational event)."""

    seq: int
    id: str
    type: str
    created_ms: int
    key_id: str
    idempotency_key: str | None
    body: str
    deliveries: tuple[NewDelivery, ...]
    application: str | None = None  # None: an operational event's
    channels: tuple[str, ...] = ()
    example: bool = False  # sent to one endpoint as an example
    deliver_at_ms: int | None = None  # its deliver_at: scheduled deliveries are due then


@dataclass(frozen=True)
class ReplayLogged:
    """New deliveries of an event already logged."""

    seq: int
    event_id: str
    event_type: str
    created_ms: int
    deliveries: tuple[NewDelivery, ...]
    application: str | None = None  # the event's


@dataclass(frozen=True)
class StateLogged:
    """A delivery's state after a change; ``attempt`` is the attempt that made it, if any."""

    seq: int
    delivery_id: str
    status: Status
    attempts: int
    updated_ms: int
    next_at_ms: int | None
    last_code: int | None
    last_error: str | None
    last_class: str | None
    attempt: Attempt | None


@dataclass(frozen=True)
class ExpungeLogged:
    seq: int
    event_id: str
    at_ms: int


Record = EventLogged | ReplayLogged | StateLogged | ExpungeLogged


def _status(value: object) -> Status:
    if value not in STATUSES:
        raise MalformedRecord(f"no such delivery status: {value!r}")
    return value


def _deliveries(rows: Any) -> tuple[NewDelivery, ...]:
    # Lua's cjson writes an empty list as {}: an event no endpoint takes.
    if not rows:
        return ()
    return tuple(NewDelivery(str(r[0]), str(r[1]), _status(r[2])) for r in rows)


def _channels(value: object) -> tuple[str, ...]:
    # Absent: none; and Lua's cjson writes an empty list as {}.
    if not value:
        return ()
    if not isinstance(value, list):
        raise TypeError(f"channels are not a list: {value!r}")
    return tuple(str(channel) for channel in value)


def _int_or_none(value: object) -> int | None:
    return None if value is None else int(cast(int, value))


def parse(entry: Entry) -> Record:
    entry_id, fields = entry
    seq = stream_seq(entry_id)
    try:
        if (raw := fields.get(OutboxField.STATE)) is not None:
            r = orjson.loads(raw)
            attempt = fields.get(OutboxField.ATTEMPT)
            return StateLogged(
                seq=seq,
                delivery_id=r["d"],
                status=_status(r["s"]),
                attempts=int(r["n"]),
                updated_ms=int(r["u"]),
                next_at_ms=_int_or_none(r.get("na")),
                last_code=_int_or_none(r.get("c")),
                last_error=r.get("e"),
                last_class=r.get("k"),
                attempt=Attempt.from_json(attempt) if attempt is not None else None,
            )
        if (raw := fields.get(OutboxField.EVENT)) is not None:
            r = orjson.loads(raw)
            return EventLogged(
                seq=seq,
                id=r["id"],
                type=r["type"],
                created_ms=int(r["t"]),
                key_id=r["key"],
                idempotency_key=r.get("idem"),
                body=fields[OutboxField.BODY],
                deliveries=_deliveries(r["dlv"]),
                application=r.get("app") or None,
                channels=_channels(r.get("ch")),
                example=r.get("ex") is True,
                deliver_at_ms=_int_or_none(r.get("at")),
            )
        if (raw := fields.get(OutboxField.REPLAY)) is not None:
            r = orjson.loads(raw)
            return ReplayLogged(
                seq, r["ev"], r["type"], int(r["t"]), _deliveries(r["dlv"]), r.get("app") or None
            )
        if (raw := fields.get(OutboxField.EXPUNGE)) is not None:
            r = orjson.loads(raw)
            return ExpungeLogged(seq, r["ev"], int(r["t"]))
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise MalformedRecord(f"outbox entry {entry_id}: {exc}") from exc
    raise MalformedRecord(f"outbox entry {entry_id} has no kind field: {sorted(fields)}")


def parse_all(entries: Sequence[Entry]) -> list[Record]:
    return [parse(entry) for entry in entries]


def finished(batch: Sequence[Record]) -> list[str]:
    """What a batch saw finish, which may leave Redis once the batch is committed: each
    delivery that became final (made disabled, or ended), and each event that fanned out to
    no endpoint (an event with deliveries leaves with the last of them)."""
    names: list[str] = []
    for record in batch:
        if isinstance(record, StateLogged):
            if record.status in FINAL_STATUSES:
                names.append(record.delivery_id)
        elif isinstance(record, EventLogged | ReplayLogged):
            names += (d.id for d in record.deliveries if d.status in FINAL_STATUSES)
            if isinstance(record, EventLogged) and not record.deliveries:
                names.append(record.id)
    return names
