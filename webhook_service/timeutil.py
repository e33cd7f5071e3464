"""UTC everywhere: milliseconds since the epoch inside, ISO 8601 with ``Z`` outside."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


# The last second iso formatted, and its text: a 202, a recorded attempt and a log line each
# format the time, mostly of the second before. One tuple, so a thread reads a pair whole.
_second: tuple[int, str] = (0, "1970-01-01T00:00:00")


def iso(ms: int) -> str:
    global _second  # a cache of one, replaced whole
    second, part = divmod(ms, 1000)
    cached = _second
    if cached[0] != second:
        # time.strftime on a struct_time: half the cost of going through datetime.
        cached = _second = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
    return f"{cached[1]}.{part:03d}Z"


def parse_iso(text: str) -> int:
    """An ISO 8601 instant to ms; a naive one is taken as UTC."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    # In whole numbers: through a float timestamp, 00:00:01.001 came out as 1000 ms.
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def parse_instant(text: str) -> int:
    """parse_iso for a time the history can hold: from 1970 on. Ids carry their time
    unsigned (ids.py), so an earlier instant has no id: a range bound made of one would wrap
    round to the far end and turn the filter inside out (until=1969… matching everything)."""
    ms = parse_iso(text)
    if ms < 0:
        raise ValueError("an instant before 1970")
    return ms
