"""Signs of life the other roles leave in Redis, and the readiness verdict built from them.

Workers write a heartbeat (their hostname, scored by time) and each scheduler the time of
its last pass over each bucket it holds (store/bucket_leases.py); ``/readyz`` and
``/metrics`` read them, and the log outbox's backlog. The scheduler check is on the bucket
passed over longest ago: every bucket must have been passed within the lag, whichever
scheduler holds it.
In tick mode neither runs, and readiness expects neither.
A check is a name, a verdict and why, so an operator sees which one fails. One verdict is
between passing and failing: ``lagging``, the log's database behind while the API still
takes events, which is worth a look but no reason to send producers elsewhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, cast

import redis
import redis.asyncio

from webhook_service.config import Settings
from webhook_service.store import keys
from webhook_service.store.bucket_leases import oldest_pass
from webhook_service.store.server_info import store_info
from webhook_service.store.telemetry import LogBacklog

HEARTBEAT_MAX_AGE_MS = 30_000
# What the worker and scheduler checks say in tick mode, which runs neither.
TICK_MODE_WORKERS = "none expected in tick mode: POST /v1/cron/tick sends"
TICK_MODE_SCHEDULER = "none expected in tick mode: each tick claims what is due and ships the log"
# What the scheduler check times: the bucket passed over longest ago.
_PASSED = "scheduler pass over every bucket"
# Heartbeats of workers gone for this long are dropped, so the set stays small.
_HEARTBEAT_FORGET_MS = 86_400_000


def beat(client: redis.Redis, worker: str, now_ms: int) -> None:
    with client.pipeline(transaction=False) as pipe:
        pipe.zadd(keys.HEARTBEATS, {worker: now_ms})
        pipe.zremrangebyscore(keys.HEARTBEATS, "-inf", now_ms - _HEARTBEAT_FORGET_MS)
        pipe.execute()


class State(StrEnum):
    OK = "ok"
    LAGGING = "lagging"  # reported, but still ready
    FAILING = "failing"


@dataclass(frozen=True)
class Check:
    name: str
    state: State
    detail: str

    @property
    def ok(self) -> bool:
        """Whether this check leaves the deployment ready (a lagging one does)."""
        return self.state is not State.FAILING


@dataclass(frozen=True)
class Bounds:
    """What the checks compare against, in ms and records."""

    scheduler_max_lag_ms: int
    log_max_lag_ms: int
    log_backlog_max: int
    # False in tick mode: the API alone runs, and the ticks do the workers' and the
    # scheduler's work, so neither is missed. (A tick's age is no verdict on this API: an
    # outside clock calls it, and a host that scales to zero is probed as it wakes.)
    expects_senders: bool = True

    @classmethod
    def of(cls, settings: Settings) -> Bounds:
        return cls(
            int(settings.scheduler_max_lag * 1000),
            int(settings.log_max_lag * 1000),
            settings.log_backlog_max,
            expects_senders=settings.mode == "service",
        )


@dataclass(frozen=True)
class ServerFacts:
    persistence: Mapping[str, Any]
    memory: Mapping[str, Any]
    last_heartbeat_ms: int | None
    last_tick_ms: int | None  # the oldest of every bucket's last pass (None: one never)
    log_backlog: LogBacklog


async def server_facts(client: redis.asyncio.Redis) -> ServerFacts | None:
    """What the checks need, in one round trip; None when Redis does not answer."""
    try:
        # INFO apart from the pipeline: on a cluster it is each primary's (server_info.py).
        persistence = await store_info(client, "persistence")
        memory = await store_info(client, "memory")
        async with client.pipeline(transaction=False) as pipe:
            pipe.zrange(keys.HEARTBEATS, -1, -1, withscores=True)
            pipe.hgetall(keys.SCHEDULER_PASSES)
            LogBacklog.read(pipe)
            newest, passes, *backlog = await pipe.execute()
    except redis.RedisError:
        return None
    beats = cast(list[tuple[str, float]], newest)
    return ServerFacts(
        persistence,
        memory,
        int(beats[0][1]) if beats else None,
        oldest_pass(passes),
        LogBacklog.parse(*backlog),
    )


def _passes(ok: bool) -> State:
    return State.OK if ok else State.FAILING


def _age(now_ms: int, then_ms: int | None, bound_ms: int, what: str) -> tuple[State, str]:
    if then_ms is None:
        return State.FAILING, f"no {what} seen yet"
    age = max(0, now_ms - then_ms)
    seen = f"last {what} {age / 1000:.1f} s ago (bound {bound_ms / 1000:g} s)"
    return _passes(age <= bound_ms), seen


def _log(backlog: LogBacklog, now_ms: int, bounds: Bounds) -> tuple[State, str]:
    """Failing only when a bucket's backlog is full, when ingest refuses its events
    anyway; a lag alone leaves the API ready, as it still takes events and delivery goes
    on."""
    if backlog.fullest >= bounds.log_backlog_max:
        return State.FAILING, (
            f"{backlog.records} log records wait for SQL, a bucket's outbox the most Redis "
            f"may hold ({bounds.log_backlog_max}): new events are refused"
        )
    if backlog.oldest_ms is None:
        return State.OK, "every log record is in SQL"
    lag = backlog.lag_ms(now_ms)
    seen = (
        f"{backlog.records} log records wait for SQL, the oldest {lag / 1000:.1f} s "
        f"(bound {bounds.log_max_lag_ms / 1000:g} s)"
    )
    return (State.OK, seen) if lag <= bounds.log_max_lag_ms else (State.LAGGING, seen)


def evaluate(facts: ServerFacts | None, now_ms: int, bounds: Bounds) -> list[Check]:
    if facts is None:
        down = "Redis did not answer"
        names = ("redis", "aof", "noeviction", "worker_heartbeat", "scheduler", "log")
        return [Check(name, State.FAILING, down) for name in names]
    aof = int(facts.persistence.get("aof_enabled", 0)) == 1
    policy = str(facts.memory.get("maxmemory_policy", "noeviction"))
    if bounds.expects_senders:
        workers = _age(now_ms, facts.last_heartbeat_ms, HEARTBEAT_MAX_AGE_MS, "worker heartbeat")
        scheduler = _age(now_ms, facts.last_tick_ms, bounds.scheduler_max_lag_ms, _PASSED)
    else:
        # Still named, so that every reader finds the same checks in either mode.
        workers = (State.OK, TICK_MODE_WORKERS)
        scheduler = (State.OK, TICK_MODE_SCHEDULER)
    return [
        Check("redis", State.OK, "reachable"),
        Check("aof", _passes(aof), "appendonly yes" if aof else "AOF is off: a crash loses events"),
        Check("noeviction", _passes(policy == "noeviction"), f"maxmemory-policy {policy}"),
        Check("worker_heartbeat", *workers),
        Check("scheduler", *scheduler),
        Check("log", *_log(facts.log_backlog, now_ms, bounds)),
    ]
