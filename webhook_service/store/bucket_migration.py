"""Schema 4 -> 5 (``webhook-service migrate``): every key into its bucket (keys.py).

A store from before buckets has no hash tag in any key name, and ids with no mark (random
characters where the mark is now: ids.py). Every id it holds goes to bucket 0, so that an
application and all it holds stay together whatever their ids say:

1. the bucket epoch (keys.BUCKET_EPOCH) is set to now, once (a run again keeps the first
   run's): every process reads it at start-up (schema.check), and an id older reads as of
   mark 0, so of bucket 0; no process of this release made one before;
2. every key is renamed to its schema 5 name (``keys.tagged``): bucket 0's tag after the
   prefix, ``{jobs}`` for jobs, ``{apikeys}`` for API keys, and none for what has none (locks,
   heartbeats, the marker, dashboard sessions, generic limiters). RENAME keeps a key's
   expiry; a key gone since the scan (an expiring one) has nothing to rename;
3. the uid map (one hash) is split by uid: each uid's mapping into its own bucket's
   (keys.apps_uid), then the old hash is deleted.

`migrate` runs this first, before the older steps (1 -> 2 ... 3 -> 4), which then find the
store in bucket 0 and the global structures there (keys.py says where each went); it stamps
5 last. Each part may be run again, to the same end. Run while no API, worker or scheduler
runs: a process of an older release writing meanwhile would write under the old names.
"""

from __future__ import annotations

from dataclasses import dataclass

import redis

from webhook_service import ids
from webhook_service.store import keys
from webhook_service.store.endpoint_rewrite import text
from webhook_service.timeutil import now_ms


@dataclass
class Moved:
    """What one run moved into buckets (a run after a whole one: nothing)."""

    epoch_ms: int = 0  # the store's bucket epoch, this run's or an earlier one's
    keys: int = 0  # keys renamed
    uids: int = 0  # uid mappings moved into their bucket's map


def move(client: redis.Redis, batch: int = 1000) -> Moved:
    client.set(keys.BUCKET_EPOCH, now_ms(), nx=True)
    epoch = int(text(client.get(keys.BUCKET_EPOCH)))
    ids.set_epoch(epoch)
    moved = Moved(epoch_ms=epoch)
    moved.keys = _rename(client, batch)
    moved.uids = _split_uids(client, batch)
    return moved


def _rename(client: redis.Redis, batch: int) -> int:
    renamed = 0
    names: list[tuple[str, str]] = []

    def flush() -> int:
        with client.pipeline(transaction=False) as pipe:
            for old, new in names:
                pipe.rename(old, new)
            results = pipe.execute(raise_on_error=False)
        names.clear()
        return sum(1 for r in results if not isinstance(r, redis.ResponseError))

    for name in client.scan_iter(match=keys.PREFIX + "*", count=batch):
        old = text(name)
        new = keys.tagged(old)
        if new is not None:
            names.append((old, new))
            if len(names) >= batch:
                renamed += flush()
    if names:
        renamed += flush()
    return renamed


def _split_uids(client: redis.Redis, batch: int) -> int:
    moved = 0
    with client.pipeline(transaction=False) as pipe:
        for uid, app_id in client.hscan_iter(keys.LEGACY_APPS_UID, count=batch):
            pipe.hset(keys.apps_uid(text(uid)), text(uid), text(app_id))
            moved += 1
        pipe.delete(keys.LEGACY_APPS_UID)
        pipe.execute()
    return moved
