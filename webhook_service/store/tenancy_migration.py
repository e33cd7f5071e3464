"""Schema 3 -> 4 (``webhook-service migrate``): a single-tenant store moves into the default
application, where the flat routes keep finding it. Run while no API, worker or scheduler
runs; each part may be run again, to the same end (keys.py, "Schema 3", names the old
layout). It runs after `migrate` put the store's keys in bucket 0 (bucket_migration.py), as
it does every older step, and the default application is of that bucket:

1. the default application is created (as the scripts do on its first use), dated by the
   store's oldest endpoint;
2. every endpoint gets ``app``, joins ``app:{app}:endpoints``, and leaves its schema 3
   subscriptions (``sub:type:{type}``, ``sub:all``) for the application's, each endpoint
   in one MULTI; subscription sets of the old layout still left (members of no endpoint)
   are deleted;
3. every event hash still in Redis gets ``app``: the default application, or '' for our
   operational events, which belong to none;
4. every idempotency record ``idem:{key}:{idem}`` is renamed ``idem:{app}:{key}:{idem}``
   (RENAME keeps its expiry);
5. the log outbox's event and replay records not yet shipped get their ``app`` too (the
   stream is copied with the same entry ids, which order the log, and put in its place in
   one RENAME), so the log files them where it files the rest.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

import orjson
import redis
from redis.typing import EncodableT, FieldT

from webhook_service.ids import id_time_ms
from webhook_service.operations import OPERATIONAL_EVENT_TYPES
from webhook_service.store import keys
from webhook_service.store.applications import (
    DEFAULT_APP_ID,
    DEFAULT_APP_NAME,
    DEFAULT_APP_UID,
    ApplicationOutcome,
    ApplicationRecord,
    AppSaveArgs,
    AppSaveMode,
)
from webhook_service.store.endpoint_rewrite import RewriteConflict, endpoint_ids, text
from webhook_service.store.scripts import Scripts
from webhook_service.timeutil import now_ms

# Conflicts on one endpoint before giving up: each retry means someone else wrote it.
_MAX_ATTEMPTS = 50


@dataclass
class Moved:
    """What one run moved into the default application (a run after a whole one: nothing)."""

    endpoints: int = 0
    events: int = 0
    idempotency: int = 0  # records renamed
    outbox: int = 0  # records not yet shipped given their application
    stale_subscriptions: int = 0  # sets of the old layout left over, deleted


def application_of(event_type: str) -> str:
    """A single-tenant store's event's application: the default one, or none ('') for ours."""
    return "" if event_type in OPERATIONAL_EVENT_TYPES else DEFAULT_APP_ID


def move(client: redis.Redis, batch: int = 1000) -> Moved:
    moved = Moved()
    _ensure_default(client)
    for endpoint_id in endpoint_ids(client, batch):
        if _adopt(client, endpoint_id):
            moved.endpoints += 1
    moved.stale_subscriptions = _drop_old_subscriptions(client, batch)
    moved.events = _events(client, batch)
    moved.idempotency = _idempotency(client, batch)
    moved.outbox = _outbox(client, batch)
    return moved


def _ensure_default(client: redis.Redis) -> None:
    oldest = [
        text(i) for i in client.zrangebylex(keys.endpoints(keys.DEFAULT_BUCKET), "-", "+", 0, 1)
    ]
    # Dated by what it holds, so that two runs over one store make the same application.
    at = id_time_ms(oldest[0]) if oldest else now_ms()
    record = ApplicationRecord(DEFAULT_APP_ID, DEFAULT_APP_NAME, DEFAULT_APP_UID, {}, None, at, at)
    args = AppSaveArgs.of(AppSaveMode.CREATE, record)
    outcome = ApplicationOutcome(
        text(Scripts(client).run_sync("app_save", args.keys(), args.argv()))
    )
    if outcome not in (ApplicationOutcome.CREATED, ApplicationOutcome.EXISTS):
        raise RuntimeError(f"the default application could not be created: {outcome}")


def _subscriptions(types: str, app_id: str | None) -> list[str]:
    """An endpoint's subscription sets for its event_types field, in the application's
    layout, or in schema 3's (``app_id`` None)."""
    if not types:
        return [keys.SCHEMA3_SUB_ALL if app_id is None else keys.sub_all(app_id)]
    listed = cast(list[str], orjson.loads(types))
    if app_id is None:
        return [keys.schema3_sub_type(t) for t in listed]
    return [keys.sub_type(app_id, t) for t in listed]


def _adopt(client: redis.Redis, endpoint_id: str) -> bool:
    """The endpoint in the default application, with its subscriptions; whether it was not
    yet (False: done before, or deleted since the listing)."""
    key = keys.endpoint(endpoint_id)
    for _ in range(_MAX_ATTEMPTS):
        with client.pipeline(transaction=True) as pipe:
            try:
                # redis-py leaves watch untyped; after it the pipeline runs commands at once.
                pipe.watch(key)  # type: ignore[no-untyped-call]
                types, url, app_id = (
                    text(v) for v in pipe.hmget(key, ["event_types", "url", "app"])
                )
                if not url:
                    return False
                pipe.multi()
                for old in _subscriptions(types, None):
                    pipe.srem(old, endpoint_id)
                for new in _subscriptions(types, DEFAULT_APP_ID):
                    pipe.sadd(new, endpoint_id)
                pipe.hset(key, "app", DEFAULT_APP_ID)
                pipe.zadd(keys.app_endpoints(DEFAULT_APP_ID), {endpoint_id: 0})
                pipe.execute()
                return app_id == ""
            except redis.WatchError:
                continue  # the endpoint changed since we read it: read it again
    raise RewriteConflict(f"endpoint {endpoint_id} changed {_MAX_ATTEMPTS} times while moved")


def _scan(client: redis.Redis, pattern: str, batch: int) -> Iterator[list[str]]:
    chunk: list[str] = []
    for name in client.scan_iter(match=pattern, count=batch):
        chunk.append(text(name))
        if len(chunk) == batch:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _drop_old_subscriptions(client: redis.Redis, batch: int) -> int:
    """Schema 3's subscription sets left once every endpoint has left them: members of
    endpoints long gone. An event type has no ':', an application's set always one after
    its application (sub:type:{app}:{type}), which tells the layouts apart."""
    head = keys.schema3_sub_type("")
    dropped = int(client.delete(keys.SCHEMA3_SUB_ALL))
    for names in _scan(client, head + "*", batch):
        old = [name for name in names if ":" not in name[len(head) :]]
        if old:
            dropped += int(client.delete(*old))
    return dropped


def _events(client: redis.Redis, batch: int) -> int:
    given = 0
    for names in _scan(client, keys.in_bucket(keys.DEFAULT_BUCKET, "event", "*"), batch):
        with client.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.hmget(name, ["type", "app"])
            found = cast(list[list[Any]], pipe.execute())
        with client.pipeline(transaction=False) as pipe:
            for name, (event_type, app_id) in zip(names, found, strict=True):
                if event_type is not None and app_id is None:
                    pipe.hset(name, "app", application_of(text(event_type)))
                    given += 1
            pipe.execute()
    return given


def _idempotency(client: redis.Redis, batch: int) -> int:
    renamed = 0
    for names in _scan(client, keys.idempotency_records(), batch):
        moves = [
            (name, new)
            for name in names
            if (new := keys.schema4_idempotency(name, DEFAULT_APP_ID)) is not None
        ]
        if not moves:
            continue
        with client.pipeline(transaction=False) as pipe:
            for name, new in moves:
                pipe.rename(name, new)
            # One that expired since the scan has nothing to rename ("no such key").
            results = pipe.execute(raise_on_error=False)
        renamed += sum(1 for r in results if not isinstance(r, redis.ResponseError))
    return renamed


def _with_app(fields: dict[FieldT, EncodableT]) -> dict[FieldT, EncodableT] | None:
    """An outbox entry's fields with its application in its event or replay record; None
    when it needs none (another kind, or it has one)."""
    for kind in (keys.OutboxField.EVENT, keys.OutboxField.REPLAY):
        if kind.value in fields:
            record = orjson.loads(text(fields[kind.value]))
            if "app" in record:
                return None
            record["app"] = application_of(record["type"])
            return {**fields, kind.value: orjson.dumps(record).decode()}
    return None


def _outbox(client: redis.Redis, batch: int) -> int:
    copy = keys.SCHEMA3_OUTBOX_COPY
    client.delete(copy)  # what a run cut short before its RENAME left
    changed = 0
    lower = "-"
    while True:
        entries = cast(
            list[tuple[Any, dict[Any, Any]]],
            client.xrange(keys.outbox(keys.DEFAULT_BUCKET), lower, "+", count=batch),
        )
        if not entries:
            break
        with client.pipeline(transaction=False) as pipe:
            for entry_id, raw in entries:
                fields: dict[FieldT, EncodableT] = {text(k): v for k, v in raw.items()}
                updated = _with_app(fields)
                if updated is not None:
                    changed += 1
                pipe.xadd(copy, updated or fields, id=text(entry_id))
            pipe.execute()
        lower = "(" + text(entries[-1][0])
    if changed:
        client.rename(copy, keys.outbox(keys.DEFAULT_BUCKET))
    else:
        client.delete(copy)
    return changed
