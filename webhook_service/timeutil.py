"""UTC everywhere: milliseconds since the epoch inside, ISO 8601 with ``Z`` outside."""

from __future__ import annotations

import time
from datetime import UTC, datetime


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def iso(ms: int) -> str:
    # time.strftime on a struct_time: half the cost of going through datetime, and every
    # 202 formats one.
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}Z"


def parse_iso(text: str) -> int:
    """An ISO 8601 instant to ms; a naive one is taken as UTC."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)
