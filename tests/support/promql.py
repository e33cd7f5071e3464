"""The deploy/ files for Prometheus and Grafana, and the series names a PromQL expression
selects: for checking that alerts and panels ask only for what /metrics serves."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
ALERTS_TEST = ROOT / "deploy" / "prometheus" / "alerts_test.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "webhook-service.json"

_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGES = re.compile(r"\[[^\]]*\]")
_LABEL_LISTS = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_CALLS = re.compile(r"\b[a-zA-Z_]\w*\s*\(")
_KEYWORDS = {"and", "or", "unless", "bool", "offset"}
_IDENT = re.compile(r"(?<![\w.$])[a-zA-Z_:][\w:]*")


def metric_names(expr: str) -> set[str]:
    """The series names a PromQL expression selects: what is left once strings, label
    matchers, ranges, label lists, function and aggregation names and keywords are gone."""
    rest = _STRINGS.sub(" ", expr)
    rest = _MATCHERS.sub(" ", rest)
    rest = _RANGES.sub(" ", rest)
    rest = _LABEL_LISTS.sub(" ", rest)
    rest = _CALLS.sub("(", rest)
    return {name for name in _IDENT.findall(rest) if name not in _KEYWORDS}


def alert_rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def dashboard_panels() -> list[dict[str, Any]]:
    return [p for p in dashboard()["panels"] if p["type"] != "row"]


def dashboard_exprs() -> list[str]:
    return [target["expr"] for panel in dashboard_panels() for target in panel["targets"]]


def as_query(expr: str, job: str, rate_interval: str = "1m") -> str:
    """A panel's expression as Prometheus takes it: Grafana's variables filled in."""
    return expr.replace("$__rate_interval", rate_interval).replace("$job", job)
