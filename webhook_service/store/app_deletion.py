"""What deleting an application takes out of Redis, step by step (api/jobs.py runs the job).

Its record and uid go first and at once (``ApplicationStore.delete``); then
``lua/app_end.lua`` ends its pending deliveries a slice of the due set at a time
(``AppEndArgs`` in, ``AppEnded`` with an ``AppEndOutcome`` out); then its endpoints go
(``EndpointStore.delete``) with the per-minute and per-hour windows the delivering processes
counted for them; last, ``sweep`` deletes every key still named after the application (its
idempotency records, which would otherwise wait out their window, and any other).

Between the end of its deliveries and the purge of its history from SQL the job waits for
the log to hold what the ends wrote: ``outbox_mark`` names the last record of every
bucket's outbox, ``shipped`` says when the shipper has trimmed each past it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, cast

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from webhook_service.store import keys
from webhook_service.store.scripts import Scripts


class AppEndOutcome(StrEnum):
    """What app_end.lua answers."""

    MORE = "more"  # the scan of the due set goes on from the cursor
    SCANNED = "scanned"  # it went round the whole due set
    EXISTS = "exists"  # the application is still there: nothing was ended


@dataclass(frozen=True)
class AppEndArgs:
    """app_end.lua's arguments, in the order its head names them."""

    app_id: str
    cursor: str  # a ZSCAN cursor into the due set: "0" starts a scan
    count: int  # about how many due entries one call looks at
    now_ms: int

    def keys(self) -> list[str]:
        return [keys.app(self.app_id)]

    def argv(self) -> list[str | int | float]:
        return [self.app_id, self.cursor, self.count, self.now_ms]


@dataclass(frozen=True)
class AppEnded:
    outcome: AppEndOutcome
    cursor: str  # where the next call starts ("0" once SCANNED)
    ended: int  # deliveries this call ended

    @classmethod
    def parse(cls, reply: Sequence[str | int]) -> AppEnded:
        """app_end.lua's reply: {outcome, next cursor, deliveries ended}."""
        outcome, cursor, ended = reply
        return cls(AppEndOutcome(str(outcome)), str(cursor), int(ended))


# The key templates an application's id directly follows in the keys of its own (keys.py,
# all of its bucket): its record (and app:{app}:endpoints after it), subscriptions and
# idempotency records, and every app_… one (its limiter, and whatever is kept per
# application). Another key may hold the id elsewhere (inside an idempotency key or an
# event type, which producers choose), never right after one of these.
_APP_TEMPLATES = tuple(
    name
    for name in keys.LUA_KEYS
    if name in ("app", "sub_type", "sub_all", "idem")
    or (name.startswith("app_") and name not in keys.LUA_PARTS)
)
# A key is written to every minute and every hour a delivering process counted an attempt
# (store/counts.py), and expires this long after its last write: the ones that may exist now.
_MINUTES = keys.WINDOW_TTL["minute"] // 60 + 2
_HOURS = keys.WINDOW_TTL["hour"] // 3600 + 2


def is_applications_key(key: str, app_id: str) -> bool:
    """Whether ``key`` is one of the application's own keys."""
    bucket = keys.bucket_of(app_id)
    for template in _APP_TEMPLATES:
        head = keys.in_bucket(bucket, template, app_id)
        if key.startswith(head) and key[len(head) : len(head) + 1] in ("", ":"):
            return True
    return False


def window_keys(endpoint_id: str, now_ms: int) -> list[str]:
    """Every per-minute and per-hour stats window of the endpoint that may still exist
    (a minute or so of clock skew between processes either way included)."""
    minute, hour = now_ms // 60_000, now_ms // 3_600_000
    return [
        *(keys.endpoint_minute(endpoint_id, m) for m in range(minute - _MINUTES, minute + 2)),
        *(keys.endpoint_hour(endpoint_id, h) for h in range(hour - _HOURS, hour + 2)),
    ]


def _stream_id(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


class ApplicationDeletion:
    def __init__(self, redis: Redis, scripts: Scripts) -> None:
        self._redis = redis
        self._scripts = scripts

    async def end_pending(self, args: AppEndArgs) -> AppEnded:
        """One slice of the due set: the application's pending deliveries on it ended."""
        return AppEnded.parse(await self._scripts.run("app_end", args.keys(), args.argv()))

    async def endpoints(self, app_id: str, limit: int) -> list[str]:
        """Up to ``limit`` of the application's endpoint ids."""
        found = await self._redis.zrange(keys.app_endpoints(app_id), 0, limit - 1)
        return cast(list[str], found)

    async def forget_windows(self, endpoint_ids: Sequence[str], now_ms: int) -> None:
        """The endpoints' stats windows gone (endpoint_delete.lua leaves them to expire)."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for endpoint_id in endpoint_ids:
                pipe.delete(*window_keys(endpoint_id, now_ms))
            await pipe.execute()

    async def outbox_mark(self) -> str:
        """The id of the last record ever appended to each bucket's log outbox, as
        "<bucket>:<id>" comma-separated ("": none yet). Trimming keeps a stream, and its
        last id, however empty."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for bucket in keys.all_buckets():
                pipe.xinfo_stream(keys.outbox(bucket))
            infos = await pipe.execute(raise_on_error=False)
        return ",".join(
            f"{bucket}:{info['last-generated-id']}"
            for bucket, info in zip(keys.all_buckets(), infos, strict=True)
            if not isinstance(info, Exception)  # no such stream: nothing ever appended
        )

    async def shipped(self, mark: str) -> bool:
        """Whether the log holds every outbox record up to ``mark``: the shipper trims what
        it committed, so nothing at or before it is left in any bucket's outbox."""
        # A mark of the release before buckets is one id: of the outbox now bucket 0's.
        marks = [part.rpartition(":")[::2] for part in mark.split(",") if part]
        async with self._redis.pipeline(transaction=False) as pipe:
            for bucket, _ in marks:
                pipe.xrange(keys.outbox(int(bucket or keys.DEFAULT_BUCKET)), "-", "+", count=1)
            oldest = cast(list[list[tuple[str, dict[str, str]]]], await pipe.execute())
        return all(
            not first or _stream_id(first[0][0]) > _stream_id(last)
            for (_, last), first in zip(marks, oldest, strict=True)
        )

    async def sweep(self, app_id: str, cursor: int, count: int) -> tuple[int, int]:
        """One SCAN call over the keyspace: the application's own keys it found deleted.
        Returns the next cursor (0: the scan is over) and how many keys went."""
        bucket = keys.bucket_of(app_id)
        # Every key of the application is of its bucket, one slot: on a cluster, the SCAN
        # is of the primary that serves it (a cluster client's SCAN asks every node, each
        # with a cursor of its own).
        target = await _bucket_node(self._redis, bucket)
        next_cursor, found = await self._redis.scan(
            cursor, match=f"{keys.head(bucket)}*{app_id}*", count=count, **target
        )
        if isinstance(next_cursor, dict):  # a cluster client's: the one node's cursor
            (next_cursor,) = next_cursor.values()
        own = [k for k in cast(list[str], found) if is_applications_key(k, app_id)]
        deleted = int(await self._redis.delete(*own)) if own else 0
        return int(next_cursor), deleted


async def _bucket_node(client: Redis, bucket: int) -> dict[str, Any]:
    """The ``target_nodes`` option naming the primary of ``bucket`` on a cluster; none on a
    plain Redis."""
    if not isinstance(client, RedisCluster):
        return {}
    cluster: RedisCluster = client
    if not cluster.nodes_manager.slots_cache:
        await cluster.initialize()
    return {"target_nodes": cluster.get_node_from_key(keys.due(bucket))}
