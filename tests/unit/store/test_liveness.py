"""The readiness verdict from what Redis says."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook_service.store.liveness import (
    HEARTBEAT_MAX_AGE_MS,
    Bounds,
    Check,
    ServerFacts,
    State,
    evaluate,
)
from webhook_service.store.telemetry import LogBacklog

NOW = 1_800_000_000_000
SHIPPING = LogBacklog(3, NOW - 200)  # a few records, shipped within the interval
BOUNDS = Bounds(scheduler_max_lag_ms=30_000, log_max_lag_ms=60_000, log_backlog_max=1000)


def _facts(
    *,
    persistence: Mapping[str, Any] | None = None,
    memory: Mapping[str, Any] | None = None,
    last_heartbeat_ms: int | None = NOW - 1000,
    last_tick_ms: int | None = NOW - 500,
    log_backlog: LogBacklog = SHIPPING,
) -> ServerFacts:
    """A healthy server's facts, but for those given (a mapping left None: the healthy one)."""
    return ServerFacts(
        persistence={"aof_enabled": 1} if persistence is None else persistence,
        memory={"maxmemory_policy": "noeviction"} if memory is None else memory,
        last_heartbeat_ms=last_heartbeat_ms,
        last_tick_ms=last_tick_ms,
        log_backlog=log_backlog,
    )


def _failing(checks: list[Check]) -> set[str]:
    return {c.name for c in checks if not c.ok}


def _log(backlog: LogBacklog) -> Check:
    (log,) = (c for c in evaluate(_facts(log_backlog=backlog), NOW, BOUNDS) if c.name == "log")
    return log


def test_all_good_is_ready() -> None:
    checks = evaluate(_facts(), NOW, BOUNDS)
    assert [c.name for c in checks] == [
        "redis", "aof", "noeviction", "worker_heartbeat", "scheduler", "log"
    ]  # fmt: skip
    assert _failing(checks) == set()
    assert {c.state for c in checks} == {State.OK}
    assert "1.0 s ago" in checks[3].detail


def test_each_failure_is_named() -> None:
    assert _failing(evaluate(_facts(persistence={"aof_enabled": 0}), NOW, BOUNDS)) == {"aof"}
    policy = {"maxmemory_policy": "allkeys-lru"}
    assert _failing(evaluate(_facts(memory=policy), NOW, BOUNDS)) == {"noeviction"}
    stale = NOW - HEARTBEAT_MAX_AGE_MS - 1
    assert _failing(evaluate(_facts(last_heartbeat_ms=stale), NOW, BOUNDS)) == {"worker_heartbeat"}
    assert _failing(evaluate(_facts(last_heartbeat_ms=None), NOW, BOUNDS)) == {"worker_heartbeat"}
    tight = Bounds(2000, 60_000, 1000)
    assert _failing(evaluate(_facts(last_tick_ms=NOW - 2001), NOW, tight)) == {"scheduler"}
    assert _failing(evaluate(_facts(last_tick_ms=NOW - 2000), NOW, tight)) == set()


def test_the_log_lags_before_it_fails() -> None:
    empty = _log(LogBacklog(0, None))
    assert (empty.state, empty.detail) == (State.OK, "every log record is in SQL")
    assert _log(LogBacklog(10, NOW - 60_000)).state is State.OK
    # Behind, but the API still takes events: reported, and still ready.
    lagging = _log(LogBacklog(10, NOW - 60_001))
    assert (lagging.state, lagging.ok) == (State.LAGGING, True)
    assert "the oldest 60.0 s (bound 60 s)" in lagging.detail
    # Full: ingest refuses, so a load balancer should send producers elsewhere.
    full = _log(LogBacklog(1000, NOW - 1, fullest=1000))
    assert (full.state, full.ok) == (State.FAILING, False)
    assert "new events are refused" in full.detail
    # As many, spread over buckets none of which is full: ingest takes every bucket's.
    assert _log(LogBacklog(1000, NOW - 1, fullest=999)).state is State.OK
    # A record stamped by a Redis clock ahead of ours has waited 0 s, not a negative time.
    assert LogBacklog(1, NOW + 5000).lag_ms(NOW) == 0


def test_no_redis_fails_everything() -> None:
    checks = evaluate(None, NOW, BOUNDS)
    assert len(checks) == 6 and not any(c.ok for c in checks)


def test_tick_mode_expects_no_worker_and_no_scheduler() -> None:
    tick = Bounds(30_000, 60_000, 1000, expects_senders=False)
    # Neither has ever run: ready all the same, and the two checks say why.
    checks = evaluate(_facts(last_heartbeat_ms=None, last_tick_ms=None), NOW, tick)
    assert [c.name for c in checks] == [
        "redis", "aof", "noeviction", "worker_heartbeat", "scheduler", "log"
    ]  # fmt: skip
    assert _failing(checks) == set()
    assert all(
        "tick mode" in c.detail for c in checks if c.name in ("worker_heartbeat", "scheduler")
    )
    # What Redis itself must be still counts.
    assert _failing(evaluate(_facts(persistence={"aof_enabled": 0}), NOW, tick)) == {"aof"}
    full = LogBacklog(1000, NOW - 1, fullest=1000)
    assert _failing(evaluate(_facts(log_backlog=full), NOW, tick)) == {"log"}
    # Service mode without either: not ready.
    none_seen = evaluate(_facts(last_heartbeat_ms=None, last_tick_ms=None), NOW, BOUNDS)
    assert _failing(none_seen) == {"worker_heartbeat", "scheduler"}
