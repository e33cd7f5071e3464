"""Chart series from the stats API's per-minute figures, for one endpoint or summed over
several."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from webhook_service.dashboard.charts import Series

# Series is part of this module's answer (what outcomes, attempts and latency return).
__all__ = ["Minutes", "Series", "attempts", "latency", "minute_labels", "outcomes"]

Minutes = Sequence[dict[str, Any]]  # one stats answer's per_minute: 60 entries, oldest first


def minute_labels(per_minute: Minutes) -> list[str]:
    """``HH:MM`` (UTC) of each minute's start."""
    return [entry["start"][11:16] for entry in per_minute]


def _summed(endpoints: Sequence[Minutes], field: str) -> list[float | None]:
    if not endpoints:
        return []
    return [float(sum(m[i][field] for m in endpoints)) for i in range(len(endpoints[0]))]


def outcomes(endpoints: Sequence[Minutes]) -> list[Series]:
    """Deliveries that ended each minute, succeeded or failed (attempts spent)."""
    return [
        Series("succeeded", _summed(endpoints, "succeeded"), "ok"),
        Series("failed", _summed(endpoints, "failed"), "bad"),
    ]


def attempts(endpoints: Sequence[Minutes]) -> list[Series]:
    """Attempts each minute: answered 2xx, or not (each of those is retried or ends failed)."""
    total = _summed(endpoints, "attempts")
    good = _summed(endpoints, "attempts_succeeded")
    other = [(t or 0) - (g or 0) for t, g in zip(total, good, strict=True)]
    return [Series("2xx", good, "ok"), Series("not 2xx", list(other), "warn")]


def latency(per_minute: Minutes) -> list[Series]:
    """One endpoint's attempt latency each minute; no attempts, no point."""
    return [
        Series(name, [entry["latency_ms"][name] for entry in per_minute], name)
        for name in ("p50", "p95")
    ]
