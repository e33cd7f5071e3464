"""How each kind of API object reads as text: the tables and records the commands print."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from webhook_service.admin import application_health as h
from webhook_service.admin import describe as d
from webhook_service.admin.application_health import Summary
from webhook_service.admin.progress import DELETION_COUNTS
from webhook_service.admin.tables import Column, render, render_fields

JSON = dict[str, Any]


def num(title: str) -> Column:
    """A column of numbers, aligned on the right."""
    return Column(title, right=True)


# The health and volume columns of an application, as application_health's cells give them.
HEALTH_TITLES = (
    "ENDPOINTS", "DISABLED", "FAILING", "DELIVERED 1H", "SUCCESS 1H", "DELIVERED 1D",
    "SUCCESS 1D", "BACKLOG",
)  # fmt: skip


def _health_cells(summary: Summary) -> list[str | int]:
    return [*h.endpoint_cells(summary), *h.volume_cells(summary)]


def applications_table(pairs: Sequence[tuple[JSON, Summary]]) -> str:
    """One row per application with its health and volume; how often it may be sent to."""
    rows = [
        (a["id"], a["uid"] or d.NOTHING, a["name"], h.word(s), *_health_cells(s),
         d.rate(a["rate_limit"]))
        for a, s in pairs
    ]  # fmt: skip
    columns: list[Column | str] = [
        "ID",
        Column("UID", max_width=40),
        Column("NAME", max_width=40),
        "HEALTH",
        *(num(title) for title in HEALTH_TITLES),
        num("RATE LIMIT"),
    ]
    return render(columns, rows)


def application_fields(app: JSON, summary: Summary | None = None) -> str:
    """One application; with its health and volume when ``summary`` is given."""
    fields: list[tuple[str, object]] = [
        ("id", app["id"]),
        ("name", app["name"]),
        ("uid", app["uid"] or d.NOTHING),
        ("metadata", d.metadata(app)),
        ("rate limit", d.rate(app["rate_limit"])),
        ("created", d.moment(app["created_at"])),
        ("updated", d.moment(app["updated_at"])),
    ]
    if summary is not None:
        fields.append(("health", h.word(summary)))
        titles = (t.lower() for t in HEALTH_TITLES)
        fields += zip(titles, _health_cells(summary), strict=True)
    return render_fields(fields)


def endpoints_table(endpoints: Sequence[JSON]) -> str:
    rows = [
        (e["id"], d.application(e), e["url"], d.endpoint_state(e), d.event_types(e),
         d.moment(e["created_at"]))
        for e in endpoints
    ]  # fmt: skip
    columns: list[Column | str] = [
        "ID",
        "APPLICATION",
        Column("URL", max_width=50),
        "STATE",
        Column("TYPES", max_width=30),
        "CREATED",
    ]
    return render(columns, rows)


def endpoint_fields(endpoint: JSON) -> str:
    fields: list[tuple[str, object]] = [
        ("id", endpoint["id"]),
        ("application", d.application(endpoint)),
        ("url", endpoint["url"]),
        ("description", endpoint["description"] or d.NOTHING),
        ("state", d.endpoint_state(endpoint)),
        ("event types", d.event_types(endpoint)),
        ("channels", d.channels(endpoint)),
        ("filter", d.payload_filter(endpoint)),
        ("signature", endpoint["signature"]),
        ("rate limit", endpoint["rate_limit"] or d.NOTHING),
        ("retries", d.retry_schedule(endpoint)),
        ("timeout", d.request_timeout(endpoint)),
        ("ordering", d.ordering(endpoint)),
        ("headers", d.endpoint_headers(endpoint)),
        ("created", d.moment(endpoint["created_at"])),
        ("updated", d.moment(endpoint["updated_at"])),
    ]
    for name in ("secret", "public_key"):
        if endpoint.get(name):
            fields.append((name.replace("_", " "), endpoint[name]))
    for previous in endpoint.get("previous_keys", []):
        fields.append(("previous key", f"signs until {d.moment(previous['expires_at'])}"))
    return render_fields(fields)


def filter_verdict(verdict: JSON) -> str:
    """test-filter's answer: whether the endpoint's filter passes the event, and why."""
    return render_fields(
        [
            ("matches", "yes" if verdict["matches"] else "no"),
            ("decided by", verdict["decided_by"] or d.NOTHING),
            ("clause", verdict["clause"]),
        ]
    )


def deliveries_table(deliveries: Sequence[JSON]) -> str:
    rows = [
        (
            x["id"], d.application(x), x["status"], x["attempts"], d.delivery_outcome(x),
            x["event_type"], x["endpoint_id"], d.moment(x["created_at"]),
        )
        for x in deliveries
    ]  # fmt: skip
    columns: list[Column | str] = [
        "ID",
        "APPLICATION",
        "STATUS",
        num("ATTEMPTS"),
        "LAST",
        Column("TYPE", max_width=30),
        "ENDPOINT",
        "CREATED",
    ]
    return render(columns, rows)


def delivery_fields(delivery: JSON) -> str:
    return render_fields(
        [
            ("id", delivery["id"]),
            ("application", d.application(delivery)),
            ("status", delivery["status"]),
            ("event", f"{delivery['event_id']} ({delivery['event_type']})"),
            ("endpoint", delivery["endpoint_id"]),
            ("attempts", delivery["attempts"]),
            ("last outcome", d.delivery_outcome(delivery)),
            ("next attempt", d.moment(delivery["next_attempt_at"])),
            ("created", d.moment(delivery["created_at"])),
            ("updated", d.moment(delivery["updated_at"])),
        ]
    )


def attempts_table(attempts: Sequence[JSON]) -> str:
    rows = [
        (
            a["number"], d.moment(a["started_at"]), d.outcome(a["status_code"], a["error"]),
            d.duration(a["duration_ms"]), a["response_body"] or d.NOTHING,
        )
        for a in attempts
    ]  # fmt: skip
    columns: list[Column | str] = [
        num("#"),
        "STARTED",
        "OUTCOME",
        num("DURATION"),
        Column("RESPONSE", max_width=50),
    ]
    return render(columns, rows)


def attempt_headers(attempts: Sequence[JSON]) -> str:
    """Each attempt's headers, what we sent and what came back, one table an attempt."""
    blocks = []
    for a in attempts:
        rows = [("sent", name, value) for name, value in a["request_headers"].items()]
        rows += [("answered", name, value) for name, value in a["response_headers"].items()]
        columns: list[Column | str] = ["", "HEADER", Column("VALUE", max_width=80)]
        blocks.append(f"attempt {a['number']}\n{render(columns, rows)}")
    return "\n\n".join(blocks)


def event_fields(event: JSON) -> str:
    return render_fields(
        [
            ("id", event["id"]),
            ("application", d.application(event)),
            ("type", event["type"]),
            ("channels", d.channels(event)),
            ("accepted", d.moment(event["timestamp"])),
            ("deliver at", d.moment(event.get("deliver_at"))),
            ("deliveries", len(event["deliveries"])),
        ]
    )


def events_table(events: Sequence[JSON]) -> str:
    rows = [
        (
            e["id"], d.application(e), e["type"], d.moment(e["timestamp"]), e["key_id"],
            e["deliveries"], "deleted" if e["payload_deleted"] else "kept",
        )
        for e in events
    ]  # fmt: skip
    columns: list[Column | str] = [
        "ID",
        "APPLICATION",
        Column("TYPE", max_width=40),
        "ACCEPTED",
        "KEY",
        num("DELIVERIES"),
        "PAYLOAD",
    ]
    return render(columns, rows)


def job_fields(job: JSON) -> str:
    fields: list[tuple[str, object]] = [
        ("job", job["id"]),
        ("kind", job["kind"]),
        ("state", job["state"]),
    ]
    if "step" in job:
        fields += [("application", job.get("application")), ("step", job["step"])]
        fields += [(label, job.get(name, 0)) for name, label in DELETION_COUNTS]
    else:
        fields += [("found", job["matched"]), ("re-sent", job["retried"])]
    return render_fields(fields)


def stats_table(pairs: Sequence[tuple[JSON, JSON]]) -> str:
    """One row per endpoint with its stats: the fleet at a glance."""
    rows = []
    for endpoint, stats in pairs:
        hour = stats["last_hour"]
        rows.append(
            (
                endpoint["id"], endpoint["url"], d.health(endpoint, stats), hour["deliveries"],
                d.percent(hour["success_rate"]), d.duration(hour["latency_ms"]["p50"]),
                d.duration(hour["latency_ms"]["p95"]), stats["backlog"], d.last_failure(stats),
            )
        )  # fmt: skip
    columns: list[Column | str] = [
        "ENDPOINT",
        Column("URL", max_width=40),
        "HEALTH",
        num("DELIVERED 1H"),
        num("SUCCESS"),
        num("P50"),
        num("P95"),
        num("BACKLOG"),
        "LAST FAILURE",
    ]
    return render(columns, rows)


def stats_windows(stats: JSON) -> str:
    title, *figures = d.WINDOW_TITLES
    columns: list[Column | str] = [title.upper(), *(num(t.upper()) for t in figures)]
    summary = render_fields(
        [
            ("endpoint", stats["endpoint_id"]),
            ("backlog", stats["backlog"]),
            ("last success", d.moment(stats["last_success_at"])),
            ("last failure", d.last_failure(stats)),
        ]
    )
    return summary + "\n\n" + render(columns, d.windows(stats))
