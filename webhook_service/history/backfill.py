"""Schema 2's history, moved out of Redis into the log (``webhook-service migrate``, 2 -> 3).

A store of schema 2 keeps every event, delivery and attempt in Redis until retention trims
them (keys.py, "Schema 2"); schema 3 keeps the work in flight there and the rest in the log
only. ``move`` walks the events oldest first (``keys.SCHEMA2_EVENTS``), a batch at a time:

1. it reads the events, every delivery each lists (replays' too) and their attempts (the
   a{n} fields and the overflow list);
2. writes them to the log in one transaction, as rows inserted once (``writer.write_rows``:
   a row there already stays as it is) with log_seq 0, so that any outbox record about the
   same delivery, all of which come later, wins; every row the default application's, or
   none's for an operational event (``tenancy.application_of``: schema 2 was single-tenant);
3. then, once that is committed, in one MULTI: a finished delivery (succeeded, failed,
   disabled) leaves Redis, a pending one keeps its state but not its attempts and counts in
   its endpoint's backlog, an event leaves with its last delivery or keeps the count of
   those in flight (``live``, which release.lua counts down), and the batch's events leave
   ``SCHEMA2_EVENTS``: the walk's progress, so that nothing is counted twice.

A run killed anywhere leaves each batch untouched in Redis (then read and written again, to
no effect) or done. ``drop_indexes`` comes after the last batch.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import cast

import redis
import sqlalchemy as sa

from webhook_service.history import partitions, tenancy, writer
from webhook_service.ids import delivery_tail, event_deliveries, id_time_ms, tail_endpoint
from webhook_service.store import keys
from webhook_service.store.deliveries import Attempt, DeliveryRecord
from webhook_service.store.states import FINAL_STATUSES
from webhook_service.timeutil import now_ms

# The fields of an idempotency record (ingest.lua): the event it made, and the fan-out it
# answers a repeated request with (schema 3; schema 2 counted the event's dlvs instead).
_IDEM_EVENT = "event"
_IDEM_FANOUT = "fanout"
# The event's count of deliveries Redis holds (common.lua create_event, release.lua).
_LIVE = "live"


@dataclass
class Moved:
    events: int = 0
    deliveries: int = 0
    attempts: int = 0
    # Still in flight, so still in Redis as well (without their attempts).
    pending: int = 0
    events_kept: int = 0


@dataclass
class _Batch:
    events: list[writer.Row] = field(default_factory=list)
    deliveries: list[writer.Row] = field(default_factory=list)
    attempts: list[writer.Row] = field(default_factory=list)
    event_ids: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)  # keys to delete
    # Pending deliveries and the attempt fields their hash holds.
    stripped: dict[str, list[str]] = field(default_factory=dict)
    live: dict[str, int] = field(default_factory=dict)  # kept events: deliveries in flight
    # Pending deliveries per endpoint, as common.lua counts them (endpoints that exist).
    backlog: Counter[str] = field(default_factory=Counter)
    # Delivery id tails that are an endpoint's id body (endpoints made before sequence
    # numbers): endpoints:seqs learns them, so that every tail is read one way.
    body_tails: set[str] = field(default_factory=set)


def _chunks(names: Iterator[str], size: int = 1000) -> Iterator[list[str]]:
    chunk: list[str] = []
    for name in names:
        chunk.append(name)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def idempotency_keys(client: redis.Redis) -> dict[str, str]:
    """Event id -> the name of its idempotency record, for every record still held. Each
    gets its ``fanout`` now if it has none, the count schema 2 answered with (the event's
    dlvs, or 0 once retention had trimmed it), before any event leaves Redis."""
    found: dict[str, str] = {}
    for names in _chunks(client.scan_iter(match=keys.idempotency_records(), count=1000)):
        with client.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.hmget(name, [_IDEM_EVENT, _IDEM_FANOUT])
                pipe.pttl(name)
            replies = pipe.execute()
        unsettled: list[tuple[str, str, int]] = []  # name, event, ttl
        for i, name in enumerate(names):
            (event_id, fanout), ttl = replies[2 * i], replies[2 * i + 1]
            if event_id is None:
                continue  # expired since the scan
            found[event_id] = name
            if fanout is None:
                unsettled.append((name, event_id, ttl))
        if not unsettled:
            continue
        with client.pipeline(transaction=False) as pipe:
            for _, event_id, _ in unsettled:
                pipe.hget(keys.event(event_id), "dlvs")
            dlvs = pipe.execute()
        with client.pipeline(transaction=True) as pipe:
            for (name, event_id, ttl), listed in zip(unsettled, dlvs, strict=True):
                pipe.hset(name, _IDEM_FANOUT, len(event_deliveries(event_id, listed)))
                # Should it have expired since it was read, HSET made a stub without the
                # request's fingerprint, which ingest takes for no record; it goes with this.
                if ttl > 0:
                    pipe.pexpire(name, ttl)
            pipe.execute()
    return found


def _event_row(event_id: str, raw: dict[str, str], idem_key: str | None) -> writer.Row:
    key_id = raw.get("key", "")
    expunged = raw.get("expunged")
    return writer.event_row(
        event_id,
        raw["type"],
        key_id,
        None if idem_key is None else keys.idempotency_key_of(idem_key, key_id),
        raw.get("body"),
        application=tenancy.application_of(raw["type"]),
        expunged_ms=int(expunged) if expunged else None,
    )


def _delivery_row(d: DeliveryRecord) -> writer.Row:
    return {
        "id": d.id,
        "created_ms": id_time_ms(d.id),
        "event_id": d.event_id,
        "endpoint_id": d.endpoint_id,
        "event_type": d.event_type,
        "status": d.status,
        "attempts": d.attempts,
        "updated_ms": d.updated_ms,
        "next_at_ms": d.next_at_ms,
        "last_code": d.last_code,
        "last_error": d.last_error,
        "last_class": d.last_class,
        "log_seq": 0,  # below every outbox record's
        "application": tenancy.application_of(d.event_type),
    }


Listed = tuple[str, dict[str, str], list[str]]  # an event's id, hash and delivery ids


def _listed(client: redis.Redis, page: Sequence[str]) -> list[Listed]:
    with client.pipeline(transaction=False) as pipe:
        for event_id in page:
            pipe.hgetall(keys.event(event_id))
        hashes = cast(list[dict[str, str]], pipe.execute())
    return [
        (event_id, raw, event_deliveries(event_id, raw.get("dlvs")))
        for event_id, raw in zip(page, hashes, strict=True)
    ]


def _take(listed: list[Listed], most: int) -> int:
    """How many of the first events of ``listed`` keep their deliveries near ``most`` (one
    event at least, however many it has)."""
    count = 0
    for n, (_, _, ids) in enumerate(listed):
        if n and count + len(ids) > most:
            return n
        count += len(ids)
    return len(listed)


def _read_batch(
    client: redis.Redis,
    taken: Sequence[Listed],
    seqs: dict[str, str],
    idempotency: dict[str, str],
    endpoints: set[str],
) -> _Batch:
    batch = _Batch()
    ids = [d for _, _, dlvs in taken for d in dlvs]
    with client.pipeline(transaction=False) as pipe:
        for delivery_id in ids:
            pipe.hgetall(keys.delivery(delivery_id))
            pipe.lrange(keys.schema2_attempts(delivery_id), 0, -1)
        replies = pipe.execute()
    found = {
        d: (cast(dict[str, str], replies[2 * i]), cast(list[str], replies[2 * i + 1]))
        for i, d in enumerate(ids)
    }
    for event_id, raw, dlvs in taken:
        batch.event_ids.append(event_id)
        if not raw:
            continue  # listed, but trimmed: nothing left to move
        batch.events.append(_event_row(event_id, raw, idempotency.get(event_id)))
        live = 0
        for delivery_id in dlvs:
            fields, overflow = found[delivery_id]
            if not fields:
                continue
            tail = delivery_tail(delivery_id)
            if (endpoint := tail_endpoint(tail)) is not None:
                batch.body_tails.add(tail)
            record = DeliveryRecord.from_hash(
                delivery_id, fields, raw["type"], endpoint or seqs.get(tail)
            )
            batch.deliveries.append(_delivery_row(record))
            in_hash = [name for name in fields if keys.schema2_attempt_field(name)]
            batch.attempts += (
                writer.attempt_row(delivery_id, Attempt.from_json(text))
                for text in [fields[name] for name in in_hash] + overflow
            )
            if overflow:
                batch.gone.append(keys.schema2_attempts(delivery_id))
            if record.status in FINAL_STATUSES:
                batch.gone.append(keys.delivery(delivery_id))
            else:
                live += 1
                if record.endpoint_id in endpoints:
                    batch.backlog[record.endpoint_id] += 1
                if in_hash:
                    batch.stripped[delivery_id] = in_hash
        if live:
            batch.live[event_id] = live
        else:
            batch.gone.append(keys.event(event_id))
    return batch


def _let_go(client: redis.Redis, batch: _Batch) -> None:
    """What the log now holds leaves Redis, in one step (the batch is committed)."""
    with client.pipeline(transaction=True) as pipe:
        for tail in batch.body_tails:
            pipe.hsetnx(keys.endpoint_seqs(keys.DEFAULT_BUCKET), tail, "ep_" + tail)
        if batch.gone:
            pipe.unlink(*batch.gone)
        for delivery_id, names in batch.stripped.items():
            pipe.hdel(keys.delivery(delivery_id), *names)
        for event_id, live in batch.live.items():
            pipe.hset(keys.event(event_id), _LIVE, live)
        for endpoint_id, pending in batch.backlog.items():
            pipe.incrby(keys.backlog(endpoint_id), pending)
        pipe.zrem(keys.SCHEMA2_EVENTS, *batch.event_ids)
        pipe.execute()


def move(client: redis.Redis, engine: sa.Engine, batch_size: int = 1000) -> Moved:
    """Every event, delivery and attempt of a schema 2 store into the log, what is finished
    out of Redis, in batches of about ``batch_size`` deliveries."""
    moved = Moved()
    idempotency = idempotency_keys(client)
    # Of bucket 0, where `migrate` put the store first (its ids are all older than the
    # bucket epoch, and read as of that bucket).
    seqs = cast(dict[str, str], client.hgetall(keys.endpoint_seqs(keys.DEFAULT_BUCKET)))
    endpoints = set(cast(list[str], client.zrange(keys.endpoints(keys.DEFAULT_BUCKET), 0, -1)))
    oldest = cast(list[str], client.zrangebylex(keys.SCHEMA2_EVENTS, "-", "+", 0, 1))
    if oldest:
        # PostgreSQL: the days of the history get their partitions, as the log's own do.
        with engine.begin() as conn:
            partitions.ensure(conn, now_ms(), since_ms=id_time_ms(oldest[0]))
    listed: list[Listed] = []  # read, not yet moved
    lower = "-"
    while True:
        if len(listed) < batch_size:
            page = cast(
                list[str], client.zrangebylex(keys.SCHEMA2_EVENTS, lower, "+", 0, batch_size)
            )
            if page:
                lower = "(" + page[-1]
                listed += _listed(client, page)
        if not listed:
            return moved
        taking = _take(listed, batch_size)
        batch = _read_batch(client, listed[:taking], seqs, idempotency, endpoints)
        del listed[:taking]
        with engine.begin() as conn:
            writer.write_rows(conn, batch.events, batch.deliveries, batch.attempts)
        _let_go(client, batch)
        moved.events += len(batch.events)
        moved.deliveries += len(batch.deliveries)
        moved.attempts += len(batch.attempts)
        moved.pending += sum(batch.live.values())
        moved.events_kept += len(batch.live)


def drop_indexes(client: redis.Redis) -> int:
    """Schema 2's history indexes and retention cursor, once every event has moved: how many
    keys were deleted."""
    names = list(client.scan_iter(match=keys.SCHEMA2_INDEXES, count=1000))
    names.append(keys.SCHEMA2_RETENTION_CURSOR)
    deleted = 0
    for start in range(0, len(names), 1000):
        deleted += client.unlink(*names[start : start + 1000])
    return deleted
