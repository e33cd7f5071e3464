"""``webhook-service events send --deliver-at/--delay``: what reaches the wire (the producer
client's Schedule), and what the command refuses before sending anything."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone

import pytest
from aioresponses import aioresponses

from tests.unit.admin.test_admin_applications import answer, parse, requests, run
from webhook_service.client import Schedule


@pytest.fixture
def http() -> Iterator[aioresponses]:
    with aioresponses() as mocked:
        yield mocked


def test_deliver_at_and_delay_are_sent_as_given(http: aioresponses) -> None:
    answer(http, "POST", {"id": "msg_1", "application": "app_01JAPP"}, 202)
    assert run("events", "send", "invoice.due", "--deliver-at", "2026-12-03T09:00:00Z") == 0
    assert run("events", "send", "invoice.due", "--deliver-at", "2026-12-03T10:00:00+01:00") == 0
    assert run("events", "send", "invoice.due", "--delay", "90") == 0
    assert run("events", "send", "invoice.due", "--delay", "2h") == 0
    bodies = [body for _, _, body in requests(http)]
    assert [
        {k: v for k, v in b.items() if k in ("deliver_at", "delay_seconds")} for b in bodies
    ] == [
        {"deliver_at": "2026-12-03T09:00:00+00:00"},
        {"deliver_at": "2026-12-03T10:00:00+01:00"},
        {"delay_seconds": 90},
        {"delay_seconds": 7200},
    ]


@pytest.mark.parametrize(
    "argv",
    [
        ("--deliver-at", "2026-12-03T09:00:00"),  # no offset
        ("--deliver-at", "soon"),
        ("--delay", "-5"),
        ("--delay", "3 weeks"),
        ("--delay", "5", "--deliver-at", "2026-12-03T09:00:00Z"),  # not both
    ],
)
def test_refused_before_anything_is_sent(argv: tuple[str, ...]) -> None:
    with pytest.raises(SystemExit) as refused:
        parse("events", "send", "invoice.due", *argv)
    assert refused.value.code == 2  # argparse: a usage error


def test_schedule_wants_an_aware_time_and_one_field() -> None:
    with pytest.raises(ValueError, match="time zone"):
        Schedule(datetime(2026, 12, 3, 9))  # naive: the point
    with pytest.raises(ValueError, match="not both"):
        Schedule(datetime(2026, 12, 3, 9, tzinfo=UTC), 5)
    plus_two = timezone(timedelta(hours=2))
    assert Schedule(datetime(2026, 12, 3, 9, tzinfo=plus_two)).fields() == {
        "deliver_at": "2026-12-03T09:00:00+02:00"
    }
    assert Schedule().fields() == {}
