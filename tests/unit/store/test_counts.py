"""AttemptCounts: what recorded attempts add up to, before a batch goes to Redis; the class
of an answer and the histogram bucket of a duration they count by."""

from __future__ import annotations

import pytest

from webhook_service.store import keys
from webhook_service.store.buckets import bucket_of
from webhook_service.store.counts import AttemptCounts
from webhook_service.store.deliveries import STATUS_CLASSES, Attempt, RecordOutcome

NOW = 1_800_000_000_000
EP = "ep_1"


def _note(counts: AttemptCounts, code: int | None, status: RecordOutcome, at: int = NOW) -> None:
    klass = "timeout" if code is None else f"{str(code)[0]}xx"
    counts.note(
        endpoint_id=EP, status_class=klass, status=status, duration_ms=3, latency_ms=700,
        code=code, error="timeout" if code is None else None, now_ms=at,
    )  # fmt: skip


def test_an_attempt_counts_in_the_metrics_both_windows_and_the_last_outcome() -> None:
    counts = AttemptCounts()
    assert not counts
    _note(counts, 200, RecordOutcome.SUCCEEDED)
    assert counts
    assert dict(counts.added[keys.metrics(0)]) == {
        "attempts:2xx": 1, "duration:2": 1, "duration_sum_ms": 3,
        "latency:10": 1, "latency_sum_ms": 700, "outcome:succeeded": 1,
    }  # fmt: skip
    minute = keys.endpoint_minute(EP, NOW // 60_000)
    hour = keys.endpoint_hour(EP, NOW // 3_600_000)
    for window in (minute, hour):
        assert dict(counts.added[window]) == {"a": 1, "d2": 1, "s": 1, "ds": 1}
    assert counts.expiry == {minute: 2 * 3600, hour: 26 * 3600}
    assert counts.last == {keys.endpoint_stats(EP): {"last_success": NOW}}


@pytest.mark.parametrize("status", list(RecordOutcome))
def test_only_a_delivery_made_final_counts_its_outcome(status: RecordOutcome) -> None:
    counts = AttemptCounts()
    _note(counts, 500, status)
    outcomes = {f for f in counts.added[keys.metrics(0)] if f.startswith("outcome:")}
    final = status in (RecordOutcome.SUCCEEDED, RecordOutcome.FAILED, RecordOutcome.DISABLED)
    assert outcomes == ({f"outcome:{status.value}"} if final else set())


def test_a_failure_counts_no_latency_and_says_what_failed() -> None:
    counts = AttemptCounts()
    _note(counts, None, RecordOutcome.FAILED)
    assert "latency_sum_ms" not in counts.added[keys.metrics(0)]
    assert counts.added[keys.metrics(0)]["attempts:timeout"] == 1
    assert counts.added[keys.endpoint_minute(EP, NOW // 60_000)]["df"] == 1
    assert counts.last[keys.endpoint_stats(EP)] == {
        "last_failure": NOW, "last_failure_code": "", "last_failure_error": "timeout",
    }  # fmt: skip


def test_a_batch_put_back_adds_to_what_came_since_and_the_newer_outcome_wins() -> None:
    counts = AttemptCounts()
    _note(counts, 500, RecordOutcome.PENDING)
    batch = counts.take()
    assert not counts
    _note(counts, 502, RecordOutcome.PENDING, at=NOW + 5)
    counts.put_back(batch)
    assert counts.added[keys.metrics(0)]["attempts:5xx"] == 2
    last = counts.last[keys.endpoint_stats(EP)]
    assert (last["last_failure"], last["last_failure_code"]) == (NOW + 5, 502)


@pytest.mark.parametrize(
    ("code", "error", "expected"),
    [
        (200, None, "2xx"), (204, None, "2xx"), (301, None, "3xx"), (404, None, "4xx"),
        (410, None, "4xx"), (503, None, "5xx"), (None, "timeout", "timeout"),
        (None, "connection", "network"), (None, "destination_blocked", "network"),
        (None, "invalid_url", "network"), (None, "invalid_response", "network"),
    ],
)  # fmt: skip
def test_an_answer_is_classed_by_its_code_or_its_error(
    code: int | None, error: str | None, expected: str
) -> None:
    attempt = Attempt(1, NOW, 3, code, error, "")
    assert attempt.status_class == expected and expected in STATUS_CLASSES


def test_buckets_are_powers_of_two() -> None:
    cases = {0: 0, 1: 0, 2: 1, 3: 2, 4: 2, 5: 3, 1000: 10, 1024: 10, 1025: 11}
    assert {ms: bucket_of(ms) for ms in cases} == cases
