"""Chart series from the stats API's per-minute entries."""

from __future__ import annotations

from typing import Any

from webhook_service.dashboard import figures


def minute(start: str, **counts: Any) -> dict[str, Any]:
    base = {"succeeded": 0, "failed": 0, "attempts": 0, "attempts_succeeded": 0,
            "latency_ms": {"p50": None, "p95": None}}  # fmt: skip
    return {"start": start, **base, **counts}


A = [minute("2026-01-31T12:00:00.000Z", succeeded=2, attempts=3, attempts_succeeded=2),
     minute("2026-01-31T12:01:00.000Z", failed=1, attempts=1,
            latency_ms={"p50": 4.0, "p95": 9.0})]  # fmt: skip
B = [minute("2026-01-31T12:00:00.000Z", succeeded=1, attempts=1, attempts_succeeded=1),
     minute("2026-01-31T12:01:00.000Z")]  # fmt: skip


def test_labels_are_the_minutes() -> None:
    assert figures.minute_labels(A) == ["12:00", "12:01"]


def test_outcomes_and_attempts_sum_over_endpoints() -> None:
    ok, bad = figures.outcomes([A, B])
    assert (ok.values, bad.values) == ([3, 0], [0, 1])
    good, other = figures.attempts([A, B])
    assert (good.values, other.values) == ([3, 0], [1, 1])
    assert figures.outcomes([]) == [figures.Series("succeeded", [], "ok"),
                                    figures.Series("failed", [], "bad")]  # fmt: skip


def test_latency_keeps_minutes_without_attempts_empty() -> None:
    p50, p95 = figures.latency(A)
    assert (p50.values, p95.values) == ([None, 4.0], [None, 9.0])
