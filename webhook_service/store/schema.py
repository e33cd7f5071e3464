"""The store's schema version: which layout of the stored data this release reads.

``keys.SCHEMA`` holds it, an integer:

1. endpoint header values in clear. Every store written before the marker existed: a store
   with endpoints and no marker is schema 1.
2. header values sealed with the master key (``store/endpoints.py`` ``seal_headers``).
3. the history in the log's database (``webhook_service/history``): Redis holds the work in
   flight, and no history index, attempt, or retention cursor (keys.py, "Schema 2"); every
   endpoint has a sequence number.
4. applications (``store/applications.py``): every endpoint, event and idempotency record
   belongs to one, subscriptions are each application's (keys.py, "Schema 3").
5. buckets (keys.py): every key one atomic step touches carries its bucket's hash tag, what
   was global is kept once per bucket, and ids carry their application's mark (ids.py); a
   store from before holds it all in bucket 0, with its bucket epoch (keys.BUCKET_EPOCH).

Every process (API, worker, scheduler) checks it at start-up (``webhook_service/cli.py``),
reads the store's bucket epoch into ``ids`` (``check``), and refuses any version but
``CURRENT``: the read path has no branch for older data.
``webhook-service migrate`` (``webhook_service/migrate.py``) brings an older store up. A
fresh store (no endpoints, no marker) is stamped ``CURRENT`` by the first process to
start, so a new install never needs to migrate.
"""

from __future__ import annotations

import logging
import time

import redis

from webhook_service import ids
from webhook_service.store import keys
from webhook_service.store.connect import DEFAULT_TIMEOUTS, RedisTimeouts, sync_client

log = logging.getLogger(__name__)

CURRENT = 5
UNMARKED = 1  # what a store holding endpoints but no marker was written by

# While Redis cannot be reached at start-up, try again this often, and say so this often.
_RETRY_S = 1.0
_WARN_EVERY = 10


class SchemaMismatch(RuntimeError):
    """The store holds data of another schema than this release reads."""


def _parse(raw: object) -> int | None:
    """The marker as read (bytes too, whether or not the client decodes replies)."""
    if raw is None:
        return None
    if isinstance(raw, bytes):
        raw = raw.decode(errors="replace")
    try:
        return int(str(raw))
    except ValueError:
        raise SchemaMismatch(
            f"the store's schema marker {keys.SCHEMA} holds {raw!r}, not a version number"
        ) from None


def stored(client: redis.Redis) -> int | None:
    """The marker's version; None when there is none."""
    return _parse(client.get(keys.SCHEMA))


def stamp(client: redis.Redis, version: int = CURRENT) -> None:
    client.set(keys.SCHEMA, version)


def refusal(version: int) -> str:
    if version < CURRENT:
        return (
            f"the store holds data of schema {version}; run `webhook-service migrate` "
            "(with the same WEBHOOK_* settings) first"
        )
    return (
        f"the store holds data of schema {version}, newer than this release reads "
        f"({CURRENT}); run the release that wrote it, or a later one"
    )


def load_epoch(client: redis.Redis) -> int:
    """The store's bucket epoch, now this process's (ids.set_epoch): 0 for a store born with
    buckets."""
    raw = client.get(keys.BUCKET_EPOCH)
    epoch = int(raw) if raw is not None else 0
    ids.set_epoch(epoch)
    return epoch


def check(client: redis.Redis) -> int:
    """The store's version once it is ``CURRENT`` (its bucket epoch read, ``load_epoch``):
    a fresh store is stamped now, any other version raises SchemaMismatch. A store written
    before the marker existed holds endpoints: under the name of that layout (keys.py,
    LEGACY_ENDPOINTS), or, once `migrate` began on it, bucket 0's, where it puts them. Only
    the first process on a fresh store stamps it, before any endpoint is made, so the stamp
    watches the marker alone: one key, as on a cluster it must be."""
    with client.pipeline(transaction=True) as pipe:
        while True:
            try:
                # redis-py leaves watch untyped; after it the pipeline runs commands at once.
                pipe.watch(keys.SCHEMA)  # type: ignore[no-untyped-call]
                version = _parse(pipe.get(keys.SCHEMA))
                if version is None and client.exists(
                    keys.LEGACY_ENDPOINTS, keys.endpoints(keys.DEFAULT_BUCKET)
                ):
                    version = UNMARKED
                if version is None:
                    pipe.multi()
                    pipe.set(keys.SCHEMA, CURRENT)
                    pipe.execute()
                    log.info("fresh store: stamped schema %d", CURRENT)
                    load_epoch(client)
                    return CURRENT
                if version != CURRENT:
                    raise SchemaMismatch(refusal(version))
                load_epoch(client)
                return version
            except redis.WatchError:
                continue  # another process's stamp: look again


def start_check(url: str, timeouts: RedisTimeouts = DEFAULT_TIMEOUTS) -> str | None:
    """At a process's start: None when it may serve, else the one line saying why not.
    Waits for Redis while it cannot be reached, as the worker and scheduler always have."""
    client = sync_client(url, timeouts)
    try:
        attempt = 0
        while True:
            try:
                check(client)
                return None
            except SchemaMismatch as exc:
                return str(exc)
            except redis.AuthenticationError:
                raise  # a wrong password does not fix itself
            except (redis.ConnectionError, redis.TimeoutError):
                if attempt % _WARN_EVERY == 0:
                    log.warning("Redis unreachable; the store's schema is checked once it is")
                attempt += 1
                time.sleep(_RETRY_S)
    finally:
        client.close()
