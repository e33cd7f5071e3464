"""The words the CLI and the dashboard use for the API's values."""

from __future__ import annotations

from typing import Any

import pytest

from webhook_service.admin import describe as d
from webhook_service.timeutil import parse_iso


def stats(success: str | None, failure: str | None, rate: float | None = 1.0) -> dict[str, Any]:
    return {
        "last_success_at": success,
        "last_failure": {"at": failure, "status_code": 500, "error": None} if failure else None,
        "last_hour": {"attempt_success_rate": rate},
    }


ENABLED = {"disabled": False}
T1, T2 = "2026-01-31T12:00:00.000Z", "2026-01-31T12:05:00.000Z"


@pytest.mark.parametrize(
    ("endpoint", "figures", "word"),
    [
        ({"disabled": True}, stats(T2, None), "disabled"),
        (ENABLED, stats(None, None, None), "idle"),
        (ENABLED, stats(T1, T2, 0.9), "failing"),  # the latest attempt failed
        (ENABLED, stats(None, T1, 0.0), "failing"),
        (ENABLED, stats(T2, T1, 0.5), "degraded"),  # recovered, but a bad hour
        (ENABLED, stats(T2, T1, 0.99), "healthy"),
        (ENABLED, stats(T2, None, 1.0), "healthy"),
    ],
)
def test_health_in_one_word(endpoint: dict[str, Any], figures: dict[str, Any], word: str) -> None:
    assert d.health(endpoint, figures) == word


def test_outcome_is_the_status_or_why_there_was_none() -> None:
    assert d.outcome(503, None) == "503"
    assert d.outcome(None, "timeout") == "timeout"
    assert d.outcome(None, None) == d.NOTHING


def test_durations_rates_and_moments() -> None:
    assert (d.duration(None), d.duration(12.4), d.duration(1530)) == (d.NOTHING, "12 ms", "1.5 s")
    assert (d.percent(None), d.percent(0.975)) == (d.NOTHING, "97.5%")
    assert d.moment("2026-01-31T12:00:05.123Z") == "2026-01-31 12:00:05Z"
    assert d.moment(None) == d.NOTHING


def test_ago_picks_the_largest_unit() -> None:
    now = parse_iso("2026-01-31T12:00:00Z")
    assert d.ago("2026-01-31T11:59:30Z", now) == "30 s ago"
    assert d.ago("2026-01-31T09:00:00Z", now) == "3 h ago"
    assert d.ago("2026-01-29T12:00:00Z", now) == "2 d ago"
    assert d.ago(None, now) == "never"


def test_endpoint_state_says_why_it_is_disabled() -> None:
    assert d.endpoint_state({"disabled": False, "disabled_reason": None}) == "enabled"
    assert d.endpoint_state({"disabled": True, "disabled_reason": "gone"}) == "disabled (gone)"
    assert d.event_types({"event_types": None}) == "all"
    assert d.event_types({"event_types": ["a.b", "c"]}) == "a.b, c"


def test_endpoint_headers_say_which_values_the_api_withheld() -> None:
    assert d.endpoint_headers({"headers": {}}) == d.NOTHING
    shown = d.endpoint_headers({"headers": {"Authorization": None, "X-Tenant": "acme"}})
    assert shown == f"Authorization: {d.WITHHELD}, X-Tenant: acme"
