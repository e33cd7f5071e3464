"""The /metrics collector turns one snapshot of the Redis counters into Prometheus text."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from webhook_service.api.metrics import DURATION_TOP, SnapshotCollector
from webhook_service.store.telemetry import LogBacklog, Snapshot

NOW = 1_800_000_000_000
BACKLOG = LogBacklog(40, NOW - 2500)


def _samples(snapshot: Snapshot) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(snapshot, NOW))
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _snapshot(
    counters: dict[str, str],
    tick: int | None = NOW - 1500,
    backlog: LogBacklog = BACKLOG,
) -> Snapshot:
    depths = {"fresh": 3, "retry": 1, "due": 7}
    return Snapshot(counters, depths, leases_in_flight=4, endpoints_disabled=1,
                    scheduler_tick_ms=tick, log_backlog=backlog)  # fmt: skip


def test_counters_gauges_and_labels() -> None:
    samples = _samples(
        _snapshot(
            {
                "events_accepted": "12",
                "rejected:validation-failed": "3",
                "outcome:succeeded": "10",
                "outcome:failed": "2",
                "attempts:2xx": "10",
                "attempts:timeout": "4",
            }
        )
    )
    assert samples[("webhook_events_accepted_total", ())] == 12
    assert samples[("webhook_events_rejected_total", (("reason", "validation-failed"),))] == 3
    assert samples[("webhook_deliveries_total", (("outcome", "succeeded"),))] == 10
    assert samples[("webhook_deliveries_total", (("outcome", "disabled"),))] == 0
    assert samples[("webhook_attempts_total", (("class", "timeout"),))] == 4
    assert samples[("webhook_attempts_total", (("class", "4xx"),))] == 0
    assert samples[("webhook_queue_depth", (("queue", "due"),))] == 7
    assert samples[("webhook_leases_in_flight", ())] == 4
    assert samples[("webhook_endpoints_disabled", ())] == 1
    assert samples[("webhook_scheduler_lag_seconds", ())] == 1.5
    assert samples[("webhook_log_backlog", ())] == 40
    assert samples[("webhook_log_lag_seconds", ())] == 2.5


def test_histograms_are_cumulative_with_everything_in_inf() -> None:
    counters = {"duration:0": "1", "duration:3": "2", "duration:40": "1", "duration_sum_ms": "9000"}
    samples = _samples(_snapshot(counters))

    def bucket(le: str) -> float:
        return samples[("webhook_attempt_duration_seconds_bucket", (("le", le),))]

    assert bucket("0.001") == 1 and bucket("0.004") == 1 and bucket("0.008") == 3
    assert bucket(str(2**DURATION_TOP / 1000)) == 3  # 2^40 ms is past the last finite bucket
    assert bucket("+Inf") == 4
    assert samples[("webhook_attempt_duration_seconds_count", ())] == 4
    assert samples[("webhook_attempt_duration_seconds_sum", ())] == 9.0
    assert samples[("webhook_delivery_latency_seconds_count", ())] == 0


def test_no_scheduler_pass_yet_means_no_lag_figure() -> None:
    assert ("webhook_scheduler_lag_seconds", ()) not in _samples(_snapshot({}, tick=None))


def test_an_empty_outbox_has_no_lag() -> None:
    samples = _samples(_snapshot({}, backlog=LogBacklog(0, None)))
    assert samples[("webhook_log_backlog", ())] == 0
    assert samples[("webhook_log_lag_seconds", ())] == 0
