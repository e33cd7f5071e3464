"""Times on the command line: ISO 8601 as the API takes it, or a span back from now."""

from __future__ import annotations

import argparse

import pytest

from webhook_service.admin.arguments import instant
from webhook_service.timeutil import parse_iso

NOW = parse_iso("2026-01-31T12:00:00Z")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90s", "2026-01-31T11:58:30.000Z"),
        ("15m", "2026-01-31T11:45:00.000Z"),
        ("15min", "2026-01-31T11:45:00.000Z"),
        ("2h", "2026-01-31T10:00:00.000Z"),
        ("7d", "2026-01-24T12:00:00.000Z"),
        ("2026-01-30T08:00:00Z", "2026-01-30T08:00:00.000Z"),
        ("2026-01-30T08:00:00+02:00", "2026-01-30T06:00:00.000Z"),
        ("2026-01-30", "2026-01-30T00:00:00.000Z"),
    ],
)
def test_instants(text: str, expected: str) -> None:
    assert instant(text, now=NOW) == expected


@pytest.mark.parametrize("text", ["yesterday", "2h ago", "-5m", "5w"])
def test_anything_else_is_a_usage_error(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        instant(text, now=NOW)
