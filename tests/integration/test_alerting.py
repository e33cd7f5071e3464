"""deploy/prometheus/alerts.yml and deploy/grafana/webhook-service.json against the real
thing: promtool checks and tests the rules, and a Prometheus of the test's own scrapes the
API's /metrics, evaluates the rules and fires one when its condition is made true; every
panel's query is one that Prometheus parses and that asks for what the API serves."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.conftest import Api, create_endpoint, send_event, wait_for
from tests.support.prometheus import PROMETHEUS, PROMTOOL, Prometheus, start_prometheus
from tests.support.promql import (
    ALERTS,
    ALERTS_TEST,
    as_query,
    dashboard_panels,
    metric_names,
)
from tests.support.receiver import Receiver
from tests.support.stack import ADMIN_KEY

JOB = "webhook-service"  # the job name alerts.yml's WebhookMetricsDown expects
ALERT = "WebhookEndpointsFailing"
# Panels that may rightly come back empty here: no maxmemory is set on the test's Valkey,
# no event broke a schema.
MAY_BE_EMPTY = ("webhook_store_memory_max_bytes", "webhook_schema_violations_total")


@pytest.fixture(scope="module", autouse=True)
def _installed() -> None:
    for tool in (PROMTOOL, PROMETHEUS):
        assert tool.exists(), f"{tool} is missing: `make prometheus` installs it"


def _promtool(*args: str) -> str:
    done = subprocess.run(
        [str(PROMTOOL), *args], cwd=ALERTS.parent, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_promtool_checks_and_tests_the_rules() -> None:
    checked = _promtool("check", "rules", ALERTS.name)
    rules = yaml.safe_load(ALERTS.read_text())["groups"][0]["rules"]
    assert f"SUCCESS: {len(rules)} rules found" in checked
    assert "SUCCESS" in _promtool("test", "rules", ALERTS_TEST.name)


def _rules_without_waits(target: Path) -> None:
    """alerts.yml with every ``for:`` at 0s, so a condition made true fires at the next
    evaluation (1 s here) rather than after its minutes; the expressions are the file's."""
    rules = yaml.safe_load(ALERTS.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule["for"] = "0s"
    target.write_text(yaml.safe_dump(rules, sort_keys=False))


@pytest.fixture
def prometheus(api: Api, tmp_path: Path) -> Iterator[Prometheus]:
    key = tmp_path / "admin.key"
    key.write_text(ADMIN_KEY)
    key.chmod(0o600)
    _rules_without_waits(tmp_path / "alerts.yml")
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "rule_files": ["alerts.yml"],
        "scrape_configs": [
            {
                "job_name": JOB,
                "authorization": {"type": "Bearer", "credentials_file": str(key)},
                "static_configs": [{"targets": [urlsplit(api.base).netloc]}],
            }
        ],
    }
    running = start_prometheus(tmp_path, config)
    yield running
    running.stop()


async def _get(api: Api, url: str, **params: str) -> Any:
    async with api.session.get(url, params=params) as answer:
        body = await answer.json()
        assert answer.status == 200 and body["status"] == "success", body
        return body["data"]


async def _query(api: Api, prometheus: Prometheus, expr: str) -> list[dict[str, Any]]:
    data = await _get(api, prometheus.url + "/api/v1/query", query=expr)
    result: list[dict[str, Any]] = data["result"]
    return result


async def _value(api: Api, prometheus: Prometheus, expr: str) -> float | None:
    result = await _query(api, prometheus, expr)
    return float(result[0]["value"][1]) if result else None


async def _rule(api: Api, prometheus: Prometheus, name: str) -> dict[str, Any]:
    data = await _get(api, prometheus.url + "/api/v1/rules", type="alert")
    (rule,) = [r for g in data["groups"] for r in g["rules"] if r["name"] == name]
    found: dict[str, Any] = rule
    return found


async def _evaluated_since(api: Api, prometheus: Prometheus, name: str, since: float) -> bool:
    rule = await _rule(api, prometheus, name)
    return datetime.fromisoformat(rule["lastEvaluation"]).timestamp() > since


async def test_prometheus_fires_an_alert_made_true(
    api: Api, receiver: Receiver, prometheus: Prometheus
) -> None:
    async def scraped() -> bool:
        return await _value(api, prometheus, f'up{{job="{JOB}"}}') == 1

    await wait_for(scraped, timeout=15)
    # The store's INFO, read for real: AOF on, nothing failed.
    for expr, expected in (
        ("webhook_store_aof_enabled", 1),
        ("webhook_store_aof_last_write_ok", 1),
        ("webhook_store_readable", 1),
    ):
        assert await _value(api, prometheus, expr) == expected, expr
    used = await _value(api, prometheus, "webhook_store_memory_used_bytes")
    assert used is not None and used > 0

    # Healthy deliveries first: the rule is evaluated on them and stays inactive.
    await create_endpoint(api, receiver, "alert-ok", ["alert.ok"])
    for n in range(3):
        await send_event(api, "alert.ok", {"n": n})
    status, _, _ = await api.call("POST", "/v1/events", json={"type": "no spaces", "data": {}})
    assert status == 422  # a rejection, for the dashboard's panel of them

    async def succeeded() -> bool:
        ok = await _value(api, prometheus, 'webhook_attempts_total{class="2xx"}')
        return ok is not None and ok >= 3

    await wait_for(succeeded, timeout=15)
    since = time.time()  # Prometheus runs on this machine's clock
    await wait_for(lambda: _evaluated_since(api, prometheus, ALERT, since), timeout=10)
    # A healthy stack: every rule evaluates on the real series without an error, and none
    # fires (each for: is 0s here, so none could hide as pending).
    data = await _get(api, prometheus.url + "/api/v1/rules", type="alert")
    rules = [rule for group in data["groups"] for rule in group["rules"]]
    assert len(rules) == len(yaml.safe_load(ALERTS.read_text())["groups"][0]["rules"])
    for rule in rules:
        assert rule["health"] == "ok" and rule["state"] == "inactive", rule

    # Now a receiver that answers 500 to everything: four attempts an event (the stack's
    # schedule), none a 2xx, so over a quarter of the attempts fail.
    receiver.behaviours["alert-bad"] = lambda _n, _i: 500
    await create_endpoint(api, receiver, "alert-bad", ["alert.bad"])
    for n in range(3):
        await send_event(api, "alert.bad", {"n": n})

    async def firing() -> bool:
        data = await _get(api, prometheus.url + "/api/v1/alerts")
        return any(
            a["labels"]["alertname"] == ALERT
            and a["state"] == "firing"
            and a["labels"] == {"alertname": ALERT, "job": JOB, "severity": "warning"}
            for a in data["alerts"]
        )

    await wait_for(firing, timeout=20)
    assert (await _rule(api, prometheus, ALERT))["state"] == "firing"
    # The API's own answers reached Prometheus through the metrics hash.
    accepted = await _value(api, prometheus, 'webhook_http_responses_total{code="202"}')
    assert accepted is not None and accepted >= 6

    # Every panel of the dashboard: a query Prometheus parses, on names the API serves.
    async with api.session.get(
        api.base + "/metrics", headers={"Authorization": f"Bearer {ADMIN_KEY}"}
    ) as answer:
        served = {family.name for family in text_string_to_metric_families(await answer.text())}
    empty = []
    for panel in dashboard_panels():
        for target in panel["targets"]:
            expr = target["expr"]
            names = {_family(name) for name in metric_names(expr)}
            assert names <= served, (panel["title"], names - served)
            if not await _query(api, prometheus, as_query(expr, JOB)):
                empty.append(expr)
    assert all(any(name in expr for name in MAY_BE_EMPTY) for expr in empty), "\n".join(empty)


def _family(sample: str) -> str:
    """The family a series name belongs to, as the text parser names it."""
    for suffix in ("_total", "_bucket", "_sum", "_count"):
        if sample.endswith(suffix):
            return sample.removesuffix(suffix)
    return sample
