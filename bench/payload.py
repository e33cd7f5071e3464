"""Event bodies of a chosen size: what the receivers get (and the store keeps) is the API's
envelope, ``{"type", "timestamp", "data"}``, so the padding is sized against that."""

from __future__ import annotations

from typing import Any

import orjson

# What webhook_service.timeutil.iso writes: always 24 characters.
_TIMESTAMP = "2026-01-01T00:00:00.000Z"
_PAD = "pad"


def envelope(event_type: str, data: Any) -> bytes:
    """The body the API signs and stores for an event of ``event_type`` with ``data``."""
    return orjson.dumps({"type": event_type, "timestamp": _TIMESTAMP, "data": data})


def event_data(event_type: str, size: int) -> dict[str, str]:
    """``data`` that makes the stored body of an ``event_type`` event ``size`` bytes long."""
    fill = size - len(envelope(event_type, {_PAD: ""}))
    if fill < 0:
        raise ValueError(f"a {event_type} event is at least {size - fill} bytes")
    return {_PAD: "x" * fill}
