"""Schema 3 -> 4 (``webhook-service migrate``): a single-tenant store moves into the default
application, where the flat routes keep finding it, or into a new application the operator
names (``migrate --application NAME [--uid UID]``: ``Destination``). Run while no API, worker
or scheduler runs; each part may be run again, to the same end (keys.py, "Schema 3", names
the old layout). It runs after `migrate` put the store's keys in bucket 0
(bucket_migration.py), as it does every older step, and the application it moves into is of
that bucket:

1. the default application is created (as the scripts do on its first use), dated by the
   store's oldest endpoint; a named one too, its id of mark 0 (ids.py), so of bucket 0
   whatever the bucket epoch. Its uid's mapping is kept in the uid's own bucket
   (keys.apps_uid), where every lookup of a uid looks: in bucket 0 with it when the uid
   hashes there, else written there after the application (the split applications.py
   keeps for an application whose uid is of another bucket);
2. every endpoint gets ``app``, joins ``app:{app}:endpoints``, and leaves its schema 3
   subscriptions (``sub:type:{type}``, ``sub:all``) for the application's, each endpoint
   in one MULTI; subscription sets of the old layout still left (members of no endpoint)
   are deleted. An operations endpoint (it gets our operational events, which belong to
   no application) stays in the default application, the only one that may hold one
   (the API refuses one elsewhere);
3. every event hash still in Redis gets ``app``: the application moved into, or '' for our
   operational events, which belong to none;
4. every idempotency record ``idem:{key}:{idem}`` is renamed ``idem:{app}:{key}:{idem}``
   (RENAME keeps its expiry);
5. the log outbox's event and replay records not yet shipped get their ``app`` too (the
   stream is copied with the same entry ids, which order the log, and put in its place in
   one RENAME), so the log files them where it files the rest.

Into a named application, ``migrate`` then gives it the log's rows too (history/
reassign.py). A run cut short is run again with the same destination: the application an
earlier run made (the only one but the default in bucket 0 of a store below schema 4, where
no process runs) is found again by its name, and a run naming another is refused
(``DestinationRefused``) before it writes anything.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

import orjson
import redis
from redis.typing import EncodableT, FieldT

from webhook_service.ids import id_time_ms, new_id
from webhook_service.operations import OPERATIONAL_EVENT_TYPES
from webhook_service.store import keys
from webhook_service.store.applications import (
    DEFAULT_APP_ID,
    DEFAULT_APP_NAME,
    DEFAULT_APP_UID,
    ID_PREFIX,
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


@dataclass(frozen=True)
class Destination:
    """The application a single-tenant store moves into: a new one of this name (and uid),
    or, with no name, the default application."""

    name: str | None = None
    uid: str | None = None

    def __post_init__(self) -> None:
        if self.uid is not None and self.name is None:
            raise ValueError("a uid names the application moved into: give its name too")
        if self.uid == DEFAULT_APP_UID:
            raise ValueError(f"the uid {DEFAULT_APP_UID} is the default application's")


DEFAULT_DESTINATION = Destination()


class DestinationRefused(RuntimeError):
    """The store cannot move where it was asked to; nothing was written."""


@dataclass
class Moved:
    """What one run moved into its application (a run after a whole one: nothing)."""

    application: str = DEFAULT_APP_ID  # the application moved into
    endpoints: int = 0
    events: int = 0
    idempotency: int = 0  # records renamed
    outbox: int = 0  # records not yet shipped given their application
    stale_subscriptions: int = 0  # sets of the old layout left over, deleted
    # Moving into a named application: operations endpoints left in the default one.
    operations: int = 0


def application_of(event_type: str, app_id: str) -> str:
    """A single-tenant store's event's application: the one moved into (``app_id``), or
    none ('') for ours."""
    return "" if event_type in OPERATIONAL_EVENT_TYPES else app_id


def move(
    client: redis.Redis, batch: int = 1000, destination: Destination = DEFAULT_DESTINATION
) -> Moved:
    at = _oldest_endpoint_ms(client)
    _refuse_another(client, destination, batch)
    default = ApplicationRecord(DEFAULT_APP_ID, DEFAULT_APP_NAME, DEFAULT_APP_UID, {}, None, at, at)
    _ensure(client, default)  # operations endpoints stay in it, whatever the destination
    app_id = DEFAULT_APP_ID if destination.name is None else _ensure_named(client, destination, at)
    moved = Moved(application=app_id)
    for endpoint_id in endpoint_ids(client, batch):
        went = _adopt(client, endpoint_id, app_id)
        if went is not None:
            moved.endpoints += 1
        if went not in (None, app_id):
            moved.operations += 1
    moved.stale_subscriptions = _drop_old_subscriptions(client, batch)
    moved.events = _events(client, batch, app_id)
    moved.idempotency = _idempotency(client, batch, app_id)
    moved.outbox = _outbox(client, batch, app_id)
    return moved


def _oldest_endpoint_ms(client: redis.Redis) -> int:
    """When the store's oldest endpoint was made: the applications it moves into are dated
    by what they hold, so that two runs over one store make the same default application
    (a named one, whose id has random bits too, is found again: ``_made_before``)."""
    oldest = [
        text(i) for i in client.zrangebylex(keys.endpoints(keys.DEFAULT_BUCKET), "-", "+", 0, 1)
    ]
    return id_time_ms(oldest[0]) if oldest else now_ms()


def _save(client: redis.Redis, args: AppSaveArgs) -> ApplicationOutcome:
    return ApplicationOutcome(text(Scripts(client).run_sync("app_save", args.keys(), args.argv())))


def _ensure(client: redis.Redis, record: ApplicationRecord) -> None:
    outcome = _save(client, AppSaveArgs.of(AppSaveMode.CREATE, record))
    if outcome not in (ApplicationOutcome.CREATED, ApplicationOutcome.EXISTS):
        raise DestinationRefused(f"the application {record.name} could not be created: {outcome}")


def _made_before(client: redis.Redis) -> list[str]:
    """The applications an earlier run of this step made but the default one: no other
    process runs on a store below schema 4, so nothing else made any."""
    listed = client.zrange(keys.apps(keys.DEFAULT_BUCKET), 0, -1)
    return [app_id for app_id in (text(i) for i in listed) if app_id != DEFAULT_APP_ID]


def _rerun_hint(client: redis.Redis, app_id: str) -> str:
    if app_id == DEFAULT_APP_ID:
        return "without --application"
    name, uid = (text(v) for v in client.hmget(keys.app(app_id), ["name", "uid"]))
    return f"with --application {name!r}" + (f" --uid {uid!r}" if uid else "")


def _refuse_another(client: redis.Redis, destination: Destination, batch: int) -> None:
    """Refuse, before anything is written, to finish a run cut short elsewhere than it
    began: the store would end split between two applications."""
    earlier = _made_before(client)
    if earlier:
        name, uid = (text(v) for v in client.hmget(keys.app(earlier[0]), ["name", "uid"]))
        # Its uid is given to it last: a run cut short before holds none yet.
        if len(earlier) == 1 and name == destination.name and uid in ("", destination.uid):
            return
        began: str | None = earlier[0]
    elif destination.name is None:
        return
    else:
        # An earlier run into the default application: it holds endpoints other than
        # operations ones (which stay there whatever the destination).
        began = next(
            (
                app_id
                for app_id, operations in _endpoint_apps(client, batch)
                if app_id == DEFAULT_APP_ID and operations != "1"
            ),
            None,
        )
    if began is not None:
        raise DestinationRefused(
            f"a run cut short began moving this store into the application {began}: run "
            f"`webhook-service migrate` again {_rerun_hint(client, began)}"
        )


def _endpoint_apps(client: redis.Redis, batch: int) -> Iterator[tuple[str, str]]:
    """Every endpoint's application ('' for none yet) and operations flag."""
    chunk: list[str] = []

    def read() -> list[tuple[str, str]]:
        with client.pipeline(transaction=False) as pipe:
            for endpoint_id in chunk:
                pipe.hmget(keys.endpoint(endpoint_id), ["app", "operations"])
            found = cast(list[list[Any]], pipe.execute())
        chunk.clear()
        return [(text(app_id), text(operations)) for app_id, operations in found]

    for endpoint_id in endpoint_ids(client, batch):
        chunk.append(endpoint_id)
        if len(chunk) == batch:
            yield from read()
    if chunk:
        yield from read()


def _ensure_named(client: redis.Redis, destination: Destination, at: int) -> str:
    """The named application's id, made now unless an earlier run made it
    (_refuse_another checked that one's name and uid). Of mark 0, bucket 0's, where the
    store is. A uid that maps in bucket 0 is mapped with it (one step); one of another
    bucket is mapped there after the application is made, then given to its record, so a
    run cut short between these finds the application again and finishes."""
    name, uid = cast(str, destination.name), destination.uid
    earlier = _made_before(client)
    if earlier:
        app_id = earlier[0]
    else:
        app_id = new_id(ID_PREFIX, at, mark=keys.DEFAULT_BUCKET)
        here = uid is not None and keys.uid_bucket(uid) == keys.DEFAULT_BUCKET
        _ensure(client, ApplicationRecord(app_id, name, uid if here else None, {}, None, at, at))
    if uid is None or text(client.hget(keys.app(app_id), "uid")) == uid:
        return app_id
    holder = text(client.hget(keys.apps_uid(uid), uid))
    if holder not in ("", app_id):
        raise DestinationRefused(f"the uid {uid} is held by the application {holder}")
    client.hset(keys.apps_uid(uid), uid, app_id)
    record = ApplicationRecord(app_id, name, uid, {}, None, at, at)
    outcome = _save(client, AppSaveArgs.of(AppSaveMode.UPDATE, record))
    if outcome is not ApplicationOutcome.UPDATED:
        raise DestinationRefused(f"the application {app_id} could not be given its uid: {outcome}")
    return app_id


def _subscriptions(types: str, app_id: str | None) -> list[str]:
    """An endpoint's subscription sets for its event_types field, in the application's
    layout, or in schema 3's (``app_id`` None)."""
    if not types:
        return [keys.SCHEMA3_SUB_ALL if app_id is None else keys.sub_all(app_id)]
    listed = cast(list[str], orjson.loads(types))
    if app_id is None:
        return [keys.schema3_sub_type(t) for t in listed]
    return [keys.sub_type(app_id, t) for t in listed]


def _adopt(client: redis.Redis, endpoint_id: str, app_id: str) -> str | None:
    """The endpoint in the application ``app_id`` (an operations endpoint: the default
    one), with its subscriptions; the application it went to, if it was in none yet (None:
    done before, or deleted since the listing)."""
    key = keys.endpoint(endpoint_id)
    for _ in range(_MAX_ATTEMPTS):
        with client.pipeline(transaction=True) as pipe:
            try:
                # redis-py leaves watch untyped; after it the pipeline runs commands at once.
                pipe.watch(key)  # type: ignore[no-untyped-call]
                types, url, held, operations = (
                    text(v) for v in pipe.hmget(key, ["event_types", "url", "app", "operations"])
                )
                if not url:
                    return None
                into = DEFAULT_APP_ID if operations == "1" else app_id
                pipe.multi()
                for old in _subscriptions(types, None):
                    pipe.srem(old, endpoint_id)
                for new in _subscriptions(types, into):
                    pipe.sadd(new, endpoint_id)
                pipe.hset(key, "app", into)
                pipe.zadd(keys.app_endpoints(into), {endpoint_id: 0})
                pipe.execute()
                return into if held == "" else None
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


def _events(client: redis.Redis, batch: int, app_id: str) -> int:
    given = 0
    for names in _scan(client, keys.in_bucket(keys.DEFAULT_BUCKET, "event", "*"), batch):
        with client.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.hmget(name, ["type", "app"])
            found = cast(list[list[Any]], pipe.execute())
        with client.pipeline(transaction=False) as pipe:
            for name, (event_type, held) in zip(names, found, strict=True):
                if event_type is not None and held is None:
                    pipe.hset(name, "app", application_of(text(event_type), app_id))
                    given += 1
            pipe.execute()
    return given


def _idempotency(client: redis.Redis, batch: int, app_id: str) -> int:
    renamed = 0
    for names in _scan(client, keys.idempotency_records(), batch):
        moves = [
            (name, new)
            for name in names
            if (new := keys.schema4_idempotency(name, app_id)) is not None
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


def _with_app(fields: dict[FieldT, EncodableT], app_id: str) -> dict[FieldT, EncodableT] | None:
    """An outbox entry's fields with its application in its event or replay record; None
    when it needs none (another kind, or it has one)."""
    for kind in (keys.OutboxField.EVENT, keys.OutboxField.REPLAY):
        if kind.value in fields:
            record = orjson.loads(text(fields[kind.value]))
            if "app" in record:
                return None
            record["app"] = application_of(record["type"], app_id)
            return {**fields, kind.value: orjson.dumps(record).decode()}
    return None


def _outbox(client: redis.Redis, batch: int, app_id: str) -> int:
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
                updated = _with_app(fields, app_id)
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
