"""The readiness verdict from what Redis says."""

from __future__ import annotations

from webhook_service.store.liveness import HEARTBEAT_MAX_AGE_MS, Check, ServerFacts, evaluate

NOW = 1_800_000_000_000


def _facts(**changes: object) -> ServerFacts:
    values: dict[str, object] = {
        "persistence": {"aof_enabled": 1},
        "memory": {"maxmemory_policy": "noeviction"},
        "last_heartbeat_ms": NOW - 1000,
        "last_tick_ms": NOW - 500,
    }
    values.update(changes)
    return ServerFacts(**values)  # type: ignore[arg-type]


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
