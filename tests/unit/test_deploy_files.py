"""deploy/: the Prometheus alert rules, their promtool tests and the Grafana dashboard, read
as files. Every metric their expressions name is one /metrics exports (the collectors of
api/metrics.py run on a snapshot with every family filled in); promtool and a real
Prometheus check the rest in tests/integration/test_alerting.py."""

from __future__ import annotations

import json
import re

import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.promql import (
    ALERTS,
    ALERTS_TEST,
    DASHBOARD,
    alert_rules,
    dashboard_exprs,
    dashboard_panels,
    metric_names,
)
from webhook_service.api.metrics import ProcessCollector, ServerCollector, SnapshotCollector
from webhook_service.store.telemetry import LogBacklog, ServerInfo, Snapshot

NOW = 1_800_000_000_000
SEVERITIES = {"critical", "warning", "info"}
# Prometheus' own series a rule may use besides ours.
PROMETHEUS_SERIES = {"up"}


def exported_names() -> set[str]:
    """Every sample name /metrics can serve: each family with a labelled series at least."""
    counters = {"rejected:validation-failed": "1", "schema_violations:t": "1", "http:202": "1"}
    snapshot = Snapshot(counters, {"fresh": 0, "retry": 0, "due": 0}, leases_in_flight=0,
                        endpoints_disabled=0, scheduler_tick_ms=NOW,
                        log_backlog=LogBacklog(0, None))  # fmt: skip
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(snapshot, NOW))
    registry.register(ServerCollector(ServerInfo(1, 2, True, True, True)))
    registry.register(ProcessCollector({}, True))
    text = generate_latest(registry).decode()
    return {s.name for family in text_string_to_metric_families(text) for s in family.samples}


def test_metric_names_are_read_from_expressions() -> None:
    expr = (
        'sum by (job) (rate(webhook_attempts_total{class!="2xx", job=~"a|b"}[5m])) / '
        "max without (instance) (up offset 5m) and on (job) histogram_quantile(0.9, "
        "rate(webhook_attempt_duration_seconds_bucket[$__rate_interval])) > bool 0.25"
    )
    assert metric_names(expr) == {
        "webhook_attempts_total", "up", "webhook_attempt_duration_seconds_bucket",
    }  # fmt: skip


def test_every_alert_is_complete_and_uses_exported_metrics() -> None:
    exported = exported_names() | PROMETHEUS_SERIES
    rules = alert_rules()
    names = [rule["alert"] for rule in rules]
    assert len(names) == len(set(names)), "alert names repeat"
    for rule in rules:
        assert rule["alert"].startswith("Webhook"), rule["alert"]
        assert rule["labels"]["severity"] in SEVERITIES, rule["alert"]
        assert {"summary", "description"} <= set(rule["annotations"]), rule["alert"]
        used = metric_names(rule["expr"])
        assert used, rule["alert"]
        assert used <= exported, (rule["alert"], used - exported)


def test_every_alert_is_tested_firing_and_not() -> None:
    """Each alert has a promtool case where it fires and one where it does not."""
    tests = yaml.safe_load(ALERTS_TEST.read_text())
    assert tests["rule_files"] == [ALERTS.name]
    fires: set[str] = set()
    silent: set[str] = set()
    for case in tests["tests"]:
        for check in case["alert_rule_test"]:
            (fires if check["exp_alerts"] else silent).add(check["alertname"])
    names = {rule["alert"] for rule in alert_rules()}
    assert fires == names
    assert silent == names


def test_the_dashboard_uses_exported_metrics_and_its_data_source() -> None:
    exported = exported_names()
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "webhook-service"
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    panels = dashboard_panels()
    assert panels
    for panel in panels:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            used = metric_names(target["expr"])
            assert used, (panel["title"], target["expr"])
            assert used <= exported, (panel["title"], used - exported)
            assert 'job="$job"' in target["expr"], (panel["title"], target["expr"])
    # Every family /metrics serves is on some panel.
    shown = {name for expr in dashboard_exprs() for name in metric_names(expr)}
    families = {re.sub(r"_(bucket|sum|count)$", "", name) for name in exported}
    drawn = {re.sub(r"_(bucket|sum|count)$", "", name) for name in shown}
    assert families <= drawn, families - drawn
