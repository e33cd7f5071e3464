"""Cluster-wide metrics: counters kept in one Redis hash, and gauges read live.

Workers, schedulers and API processes are many; a counter kept in one process's memory
would show a part. So every count ends in a ``metrics`` hash, one a bucket (``keys.metrics``:
a step counts in its own bucket's, so that no step crosses one), which a scrape sums. The
counts of states are ``HINCRBY``s in the Lua step that changes the state; the counts of
attempts (classes, durations, latencies) are added by the process that made them, a batch
a ``WEBHOOK_COUNTS_INTERVAL`` (store/counts.py says why). A scrape reads the hashes plus a
few lengths, in one round trip. Their fields:

======================  =========================================================
events_accepted         events stored by POST /v1/events (ingest.lua)
rejected:{kind}         POST /v1/events answered 4xx, by problem kind (the API)
schema_violations:{t}   events of type t stored though their data broke its catalog
                        schema (WEBHOOK_VALIDATE_EVENTS=warn, api/validation.py)
outcome:{status}        deliveries that became succeeded, failed or disabled
attempts:{class}        attempts by class: 2xx..5xx, timeout, network (counts.py)
duration:{b}            attempt durations, power-of-two ms buckets (``buckets.py``)
duration_sum_ms         their sum
latency:{b}             delivery creation to its 2xx attempt, same buckets
latency_sum_ms          their sum
http:{code}             the API's answers by HTTP status (api/response_counts.py)
======================  =========================================================

The store's own state that alerts want (its memory against ``maxmemory``, whether its AOF
writes succeed) comes from one ``INFO`` a scrape (``server_info``), sent apart from the
snapshot's pipeline: redis-py's cluster pipeline refuses INFO, and ``snapshot`` runs on one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from webhook_service.store import keys
from webhook_service.store.bucket_leases import oldest_pass
from webhook_service.store.server_info import store_info

# Endpoints read per pipeline when counting disabled ones and their leases.
_CHUNK = 1000


@dataclass(frozen=True)
class LogBacklog:
    """The log outboxes: records not yet in SQL, the most one bucket holds (ingest refuses
    an event of a bucket whose outbox holds WEBHOOK_LOG_BACKLOG_MAX), and when the oldest
    was written (its stream id's time, from the Redis server's clock)."""

    records: int
    oldest_ms: int | None
    fullest: int = 0

    @staticmethod
    def read(pipe: Pipeline) -> None:
        """Queue what ``parse`` needs: two replies a bucket, each read in O(1) whatever the
        backlog."""
        for bucket in keys.all_buckets():
            pipe.xlen(keys.outbox(bucket))
            pipe.xrange(keys.outbox(bucket), "-", "+", count=1)

    @classmethod
    def parse(cls, *replies: Any) -> LogBacklog:
        lengths = [int(n) for n in replies[0::2]]
        firsts = cast(list[list[tuple[str, dict[str, str]]]], replies[1::2])
        oldest = [int(first[0][0].partition("-")[0]) for first in firsts if first]
        return cls(sum(lengths), min(oldest, default=None), max(lengths, default=0))

    def lag_ms(self, now_ms: int) -> int:
        """How long the oldest record has waited; 0 when none does. Never negative: the
        record's time is the Redis server's, ``now_ms`` this process's."""
        return 0 if self.oldest_ms is None else max(0, now_ms - self.oldest_ms)


@dataclass(frozen=True)
class Snapshot:
    counters: dict[str, str]
    queue_depths: dict[str, int]  # fresh, retry (Celery lists), due
    leases_in_flight: int
    endpoints_disabled: int
    scheduler_tick_ms: int | None  # every bucket passed since (bucket_leases.oldest_pass)
    log_backlog: LogBacklog


@dataclass(frozen=True)
class ServerInfo:
    """What INFO (its default sections: memory and persistence among them) says about the
    store's health. ``maxmemory`` 0 means no limit is set."""

    used_memory: int
    maxmemory: int
    aof_enabled: bool
    aof_last_write_ok: bool
    aof_last_rewrite_ok: bool

    @classmethod
    def parse(cls, info: Mapping[str, Any]) -> ServerInfo:
        # A status other than "ok" is "err": the last write (or rewrite) failed, typically a
        # full or failing disk; Redis then refuses writes until one succeeds.
        return cls(
            used_memory=int(info.get("used_memory", 0)),
            maxmemory=int(info.get("maxmemory", 0)),
            aof_enabled=int(info.get("aof_enabled", 0)) == 1,
            aof_last_write_ok=str(info.get("aof_last_write_status", "ok")) == "ok",
            aof_last_rewrite_ok=str(info.get("aof_last_bgrewrite_status", "ok")) == "ok",
        )


async def server_info(redis: Redis) -> ServerInfo:
    """One INFO of the default sections: every Redis and Valkey version answers it, where
    naming two sections in one call needs 7.0. On a cluster, every primary's, merged."""
    return ServerInfo.parse(await store_info(redis))


async def add_response_counts(redis: Redis, counts: Mapping[int, int]) -> None:
    """The API's answers by status, added at once (MULTI/EXEC: a batch tried again after a
    refusal was not half added before)."""
    async with redis.pipeline(transaction=True) as pipe:
        for code, n in sorted(counts.items()):
            pipe.hincrby(keys.metrics(keys.DEFAULT_BUCKET), f"http:{code}", n)
        await pipe.execute()


async def count_rejection(redis: Redis, kind: str) -> None:
    await redis.hincrby(keys.metrics(keys.DEFAULT_BUCKET), "rejected:" + kind, 1)


async def count_schema_violation(redis: Redis, event_type: str) -> None:
    await redis.hincrby(keys.metrics(keys.DEFAULT_BUCKET), "schema_violations:" + event_type, 1)


async def snapshot(redis: Redis, now_ms: int) -> Snapshot:
    n = keys.BUCKETS
    async with redis.pipeline(transaction=False) as pipe:
        # kombu's Redis transport keeps each queue as a list named after it.
        pipe.llen(keys.QUEUE_FRESH)
        pipe.llen(keys.QUEUE_RETRY)
        pipe.hgetall(keys.SCHEDULER_PASSES)
        for bucket in keys.all_buckets():
            pipe.hgetall(keys.metrics(bucket))
            pipe.zcard(keys.due(bucket))
            pipe.zrange(keys.endpoints(bucket), 0, -1)
        LogBacklog.read(pipe)
        replies = await pipe.execute()
    fresh, retry, passes = replies[:3]
    per_bucket = replies[3 : 3 + 3 * n]
    counters = _sum(cast(list[dict[str, str]], per_bucket[0::3]))
    endpoints = [e for found in cast(list[list[str]], per_bucket[2::3]) for e in found]
    disabled, leases = await _endpoint_gauges(redis, endpoints, now_ms)
    return Snapshot(
        counters=counters,
        queue_depths={"fresh": fresh, "retry": retry, "due": sum(per_bucket[1::3])},
        leases_in_flight=leases,
        endpoints_disabled=disabled,
        scheduler_tick_ms=oldest_pass(passes),
        log_backlog=LogBacklog.parse(*replies[3 + 3 * n :]),
    )


def _sum(hashes: list[dict[str, str]]) -> dict[str, str]:
    """The buckets' counters added up (every field is an integer count)."""
    total: Counter[str] = Counter()
    for fields in hashes:
        total.update({name: int(value) for name, value in fields.items()})
    return {name: str(value) for name, value in total.items()}


async def _endpoint_gauges(redis: Redis, endpoints: list[str], now_ms: int) -> tuple[int, int]:
    """Disabled endpoints, and leases held (the per-endpoint in-flight sets lease.lua keeps).
    Endpoints are few next to deliveries; reading each one's flag keeps every path that
    disables or enables one (API, health rules, recovery) out of this count's way."""
    disabled = leases = 0
    for start in range(0, len(endpoints), _CHUNK):
        chunk = endpoints[start : start + _CHUNK]
        async with redis.pipeline(transaction=False) as pipe:
            for endpoint_id in chunk:
                pipe.hget(keys.endpoint(endpoint_id), "disabled")
                pipe.zcount(keys.inflight(endpoint_id), now_ms, "+inf")
            replies = await pipe.execute()
        disabled += sum(1 for flag in replies[0::2] if flag == "1")
        leases += sum(int(n) for n in replies[1::2])
    return disabled, leases
