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


def parse_instant(text: str) -> int:
    """parse_iso for a time the history can hold: from 1970 on. Ids carry their time
    unsigned (ids.py), so an earlier instant has no id: a range bound made of one would wrap
    round to the far end and turn the filter inside out (until=1969… matching everything)."""
    ms = parse_iso(text)
    if ms < 0:
        raise ValueError("an instant before 1970")
    return ms
