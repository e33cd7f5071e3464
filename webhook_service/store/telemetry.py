"""Cluster-wide metrics: counters kept in one Redis hash, and gauges read live.

Workers, schedulers and API processes are many; a counter kept in one process's memory
would show a part. So every count ends in the ``metrics`` hash (``keys.METRICS``). The
counts of states are ``HINCRBY``s in the Lua step that changes the state; the counts of
attempts (classes, durations, latencies) are added by the process that made them, a batch
a ``WEBHOOK_COUNTS_INTERVAL`` (store/counts.py says why). A scrape reads the hash plus a
few lengths. Its fields:

======================  =========================================================
events_accepted         events stored by POST /v1/events (ingest.lua)
rejected:{kind}         POST /v1/events answered 4xx, by problem kind (the API)
outcome:{status}        deliveries that became succeeded, failed or disabled
attempts:{class}        attempts by class: 2xx..5xx, timeout, network (counts.py)
duration:{b}            attempt durations, power-of-two ms buckets (``buckets.py``)
duration_sum_ms         their sum
latency:{b}             delivery creation to its 2xx attempt, same buckets
latency_sum_ms          their sum
======================  =========================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from webhook_service.store import keys

# Endpoints read per pipeline when counting disabled ones and their leases.
_CHUNK = 1000


@dataclass(frozen=True)
class LogBacklog:
    """The log outbox: records not yet in SQL, and when the oldest was written (its stream
    id's time, from the Redis server's clock)."""

    records: int
    oldest_ms: int | None

    @staticmethod
    def read(pipe: Pipeline) -> None:
        """Queue what ``parse`` needs: two replies, read in O(1) whatever the backlog."""
        pipe.xlen(keys.LOG_OUTBOX)
        pipe.xrange(keys.LOG_OUTBOX, "-", "+", count=1)

    @classmethod
    def parse(cls, length: int, first: list[tuple[str, dict[str, str]]]) -> LogBacklog:
        return cls(int(length), int(first[0][0].partition("-")[0]) if first else None)

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
    scheduler_tick_ms: int | None
    log_backlog: LogBacklog


async def count_rejection(redis: Redis, kind: str) -> None:
    await redis.hincrby(keys.METRICS, "rejected:" + kind, 1)


async def snapshot(redis: Redis, now_ms: int) -> Snapshot:
    async with redis.pipeline(transaction=False) as pipe:
        pipe.hgetall(keys.METRICS)
        # kombu's Redis transport keeps each queue as a list named after it.
        pipe.llen(keys.QUEUE_FRESH)
        pipe.llen(keys.QUEUE_RETRY)
        pipe.zcard(keys.DUE)
        pipe.zrange(keys.ENDPOINTS, 0, -1)
        pipe.get(keys.SCHEDULER_TICK)
        LogBacklog.read(pipe)
        counters, fresh, retry, due, endpoints, tick, *backlog = await pipe.execute()
    disabled, leases = await _endpoint_gauges(redis, cast(list[str], endpoints), now_ms)
    return Snapshot(
        counters=counters,
        queue_depths={"fresh": fresh, "retry": retry, "due": due},
        leases_in_flight=leases,
        endpoints_disabled=disabled,
        scheduler_tick_ms=int(tick) if tick else None,
        log_backlog=LogBacklog.parse(*backlog),
    )


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
                pipe.zcount(keys.LUA_KEYS["inflight"] + endpoint_id, now_ms, "+inf")
            replies = await pipe.execute()
        disabled += sum(1 for flag in replies[0::2] if flag == "1")
        leases += sum(int(n) for n in replies[1::2])
    return disabled, leases
