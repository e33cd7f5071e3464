"""The readiness verdict from what Redis says."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook_service.store.liveness import HEARTBEAT_MAX_AGE_MS, Check, ServerFacts, evaluate

NOW = 1_800_000_000_000


def _facts(
    *,
    persistence: Mapping[str, Any] | None = None,
    memory: Mapping[str, Any] | None = None,
    last_heartbeat_ms: int | None = NOW - 1000,
    last_tick_ms: int | None = NOW - 500,
) -> ServerFacts:
    """A healthy server's facts, but for those given (a mapping left None: the healthy one)."""
    return ServerFacts(
        persistence={"aof_enabled": 1} if persistence is None else persistence,
        memory={"maxmemory_policy": "noeviction"} if memory is None else memory,
        last_heartbeat_ms=last_heartbeat_ms,
        last_tick_ms=last_tick_ms,
    )


def _failing(checks: list[Check]) -> set[str]:
    return {c.name for c in checks if not c.ok}


def test_all_good_is_ready() -> None:
    checks = evaluate(_facts(), NOW, 30_000)
    assert [c.name for c in checks] == [
        "redis", "aof", "noeviction", "worker_heartbeat", "scheduler"
    ]  # fmt: skip
    assert _failing(checks) == set()
    assert "1.0 s ago" in checks[3].detail


def test_each_failure_is_named() -> None:
    assert _failing(evaluate(_facts(persistence={"aof_enabled": 0}), NOW, 30_000)) == {"aof"}
    policy = {"maxmemory_policy": "allkeys-lru"}
    assert _failing(evaluate(_facts(memory=policy), NOW, 30_000)) == {"noeviction"}
    stale = NOW - HEARTBEAT_MAX_AGE_MS - 1
    assert _failing(evaluate(_facts(last_heartbeat_ms=stale), NOW, 30_000)) == {"worker_heartbeat"}
    assert _failing(evaluate(_facts(last_heartbeat_ms=None), NOW, 30_000)) == {"worker_heartbeat"}
    assert _failing(evaluate(_facts(last_tick_ms=NOW - 2001), NOW, 2000)) == {"scheduler"}
    assert _failing(evaluate(_facts(last_tick_ms=NOW - 2000), NOW, 2000)) == set()


def test_no_redis_fails_everything() -> None:
    checks = evaluate(None, NOW, 30_000)
    assert len(checks) == 5 and not any(c.ok for c in checks)
