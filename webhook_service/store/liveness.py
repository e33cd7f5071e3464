"""Signs of life the other roles leave in Redis, and the readiness verdict built from them.

Workers write a heartbeat (their hostname, scored by time) and the acting scheduler the
time of its last pass; ``/readyz`` and ``/metrics`` read them. A check is a name, a verdict
and why, so an operator sees which one fails.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

import redis
import redis.asyncio

from webhook_service.store import keys

HEARTBEAT_MAX_AGE_MS = 30_000
# Heartbeats of workers gone for this long are dropped, so the set stays small.
_HEARTBEAT_FORGET_MS = 86_400_000


def beat(client: redis.Redis, worker: str, now_ms: int) -> None:
    with client.pipeline(transaction=False) as pipe:
        pipe.zadd(keys.HEARTBEATS, {worker: now_ms})
        pipe.zremrangebyscore(keys.HEARTBEATS, "-inf", now_ms - _HEARTBEAT_FORGET_MS)
        pipe.execute()


def tick(client: redis.Redis, now_ms: int) -> None:
    client.set(keys.SCHEDULER_TICK, now_ms)


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class ServerFacts:
    persistence: Mapping[str, Any]
    memory: Mapping[str, Any]
    last_heartbeat_ms: int | None
    last_tick_ms: int | None


async def server_facts(client: redis.asyncio.Redis) -> ServerFacts | None:
    """What the checks need, in one round trip; None when Redis does not answer."""
    try:
        async with client.pipeline(transaction=False) as pipe:
            pipe.info("persistence")
            pipe.info("memory")
            pipe.zrange(keys.HEARTBEATS, -1, -1, withscores=True)
            pipe.get(keys.SCHEDULER_TICK)
            persistence, memory, newest, tick_ms = await pipe.execute()
    except redis.RedisError:
        return None
    beats = cast(list[tuple[str, float]], newest)
    return ServerFacts(
        persistence,
        memory,
        int(beats[0][1]) if beats else None,
        int(tick_ms) if tick_ms else None,
    )


def _age(now_ms: int, then_ms: int | None, bound_ms: int, what: str) -> tuple[bool, str]:
    if then_ms is None:
        return False, f"no {what} seen yet"
    age = max(0, now_ms - then_ms)
    return age <= bound_ms, f"last {what} {age / 1000:.1f} s ago (bound {bound_ms / 1000:g} s)"


def evaluate(facts: ServerFacts | None, now_ms: int, max_scheduler_lag_ms: int) -> list[Check]:
    if facts is None:
        down = "Redis did not answer"
        names = ("redis", "aof", "noeviction", "worker_heartbeat", "scheduler")
        return [Check(name, False, down) for name in names]
    aof = int(facts.persistence.get("aof_enabled", 0)) == 1
    policy = str(facts.memory.get("maxmemory_policy", "noeviction"))
    workers = _age(now_ms, facts.last_heartbeat_ms, HEARTBEAT_MAX_AGE_MS, "worker heartbeat")
    scheduler = _age(now_ms, facts.last_tick_ms, max_scheduler_lag_ms, "scheduler pass")
    return [
        Check("redis", True, "reachable"),
        Check("aof", aof, "appendonly yes" if aof else "AOF is off: a crash loses events"),
        Check("noeviction", policy == "noeviction", f"maxmemory-policy {policy}"),
        Check("worker_heartbeat", *workers),
        Check("scheduler", *scheduler),
    ]
