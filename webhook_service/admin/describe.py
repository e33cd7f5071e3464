"""The API's values in words a person reads: outcomes, durations, rates, health.

Pure functions on the API's JSON, shared by the command line and the dashboard so both
say the same thing the same way.
"""

from __future__ import annotations

import json
from typing import Any

from webhook_service.timeutil import parse_iso

NOTHING = "-"
# An hour whose attempts succeed less often than this is "degraded" even if the last one did.
HEALTHY_RATE = 0.95


def outcome(status_code: int | None, error: str | None) -> str:
    """What an attempt came to: the HTTP status, or why there was none."""
    if status_code is not None:
        return str(status_code)
    return error or NOTHING


def delivery_outcome(delivery: dict[str, Any]) -> str:
    return outcome(delivery.get("last_status_code"), delivery.get("last_error"))


def duration(ms: float | None) -> str:
    if ms is None:
        return NOTHING
    if ms < 1000:
        return f"{ms:.0f} ms"
    return f"{ms / 1000:.1f} s"


def percent(rate: float | None) -> str:
    if rate is None:
        return NOTHING
    return f"{rate * 100:.1f}%"


def moment(iso: str | None) -> str:
    """A timestamp to the second, still UTC: ``2026-01-31 12:00:05Z``."""
    if not iso:
        return NOTHING
    return iso[:10] + " " + iso[11:19] + "Z"


def ago(iso: str | None, now_ms: int) -> str:
    if not iso:
        return "never"
    seconds = max(0, (now_ms - parse_iso(iso)) // 1000)
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size:
            return f"{seconds // size} {unit} ago"
    return f"{seconds} s ago"


def endpoint_state(endpoint: dict[str, Any]) -> str:
    if not endpoint["disabled"]:
        return "enabled"
    reason = endpoint.get("disabled_reason")
    return f"disabled ({reason})" if reason else "disabled"


def application(record: dict[str, Any]) -> str:
    """The application an endpoint, event or delivery belongs to; none: an operational
    event's (the operator's), or an API that predates applications."""
    return record.get("application") or NOTHING


def channels(record: dict[str, Any]) -> str:
    """An endpoint's or an event's channels; none: an endpoint takes every event of its
    types, an event reaches only endpoints without channels."""
    listed = record.get("channels")
    return ", ".join(listed) if listed else NOTHING


def payload_filter(endpoint: dict[str, Any]) -> str:
    """An endpoint's filter as compact JSON, in the order it was given; none: every event
    of its types and channels."""
    found = endpoint.get("filter")
    return NOTHING if found is None else json.dumps(found, separators=(",", ":"))


def metadata(app: dict[str, Any]) -> str:
    pairs = app.get("metadata") or {}
    return ", ".join(f"{key}={value}" for key, value in pairs.items()) if pairs else NOTHING


def rate(per_second: float | None) -> str:
    return NOTHING if per_second is None else f"{per_second:g}/s"


# An endpoint without its own retry policy follows the operator's settings.
GLOBAL = "global setting"


def retry_schedule(endpoint: dict[str, Any]) -> str:
    """The endpoint's own schedule: the delay before each attempt, and how many there are."""
    schedule = endpoint.get("retry_schedule")
    if schedule is None:
        return GLOBAL
    return f"{', '.join(f'{delay:g}' for delay in schedule)} s ({len(schedule)} attempts)"


def request_timeout(endpoint: dict[str, Any]) -> str:
    seconds = endpoint.get("timeout_seconds")
    return GLOBAL if seconds is None else f"{seconds:g} s"


def ordering(endpoint: dict[str, Any]) -> str:
    if endpoint.get("ordering") == "fifo":
        return "FIFO: one at a time, in the order accepted"
    return "none: several at once"


def event_types(endpoint: dict[str, Any]) -> str:
    types = endpoint.get("event_types")
    return ", ".join(types) if types else "all"


# What the API gives a key without endpoints:write in place of a header's value.
WITHHELD = "(needs endpoints:write)"


def endpoint_headers(endpoint: dict[str, Any]) -> str:
    """``Name: value`` pairs; a value the API withheld (null) is said to be so."""
    shown = endpoint.get("headers") or {}
    if not shown:
        return NOTHING
    return ", ".join(
        f"{name}: {WITHHELD if value is None else value}" for name, value in shown.items()
    )


def health(endpoint: dict[str, Any], stats: dict[str, Any]) -> str:
    """One word for an endpoint: disabled, idle, failing, degraded or healthy.

    Failing: its latest attempt did not get a 2xx. Degraded: it did, but over the last hour
    fewer than 95 % of attempts did.
    """
    if endpoint["disabled"]:
        return "disabled"
    success = stats.get("last_success_at")
    failure = (stats.get("last_failure") or {}).get("at")
    if success is None and failure is None:
        return "idle"
    if failure is not None and (success is None or parse_iso(failure) > parse_iso(success)):
        return "failing"
    rate = stats["last_hour"]["attempt_success_rate"]
    if rate is not None and rate < HEALTHY_RATE:
        return "degraded"
    return "healthy"


def last_failure(stats: dict[str, Any]) -> str:
    failure = stats.get("last_failure")
    if not failure:
        return NOTHING
    return f"{outcome(failure['status_code'], failure['error'])} at {moment(failure['at'])}"


WINDOW_TITLES = (
    "Window", "Deliveries", "Succeeded", "Failed", "Success", "Attempts", "Attempts 2xx",
    "p50", "p95",
)  # fmt: skip


def windows(stats: dict[str, Any]) -> list[list[str | int]]:
    """The last hour and the last day of a stats answer, one row each, as WINDOW_TITLES."""
    rows: list[list[str | int]] = []
    for name in ("last_hour", "last_day"):
        w = stats[name]
        rows.append(
            [
                name.replace("_", " "), w["deliveries"], w["succeeded"], w["failed"],
                percent(w["success_rate"]), w["attempts"], percent(w["attempt_success_rate"]),
                duration(w["latency_ms"]["p50"]), duration(w["latency_ms"]["p95"]),
            ]
        )  # fmt: skip
    return rows
