"""An event's deliver_at and delay_seconds (api/models.py EventIn, api/scheduling.py): the
forms taken, the bounds, and the 422 that names the field."""

from __future__ import annotations

from typing import Any

import pytest

from webhook_service.api.body import validate
from webhook_service.api.models import MAX_SCHEDULE_AHEAD_S, EventIn
from webhook_service.api.problems import ProblemError
from webhook_service.api.scheduling import deliver_at_ms
from webhook_service.timeutil import parse_iso

NOW = parse_iso("2026-12-02T10:00:00Z")


def _event(**fields: Any) -> EventIn:
    return validate(EventIn, {"type": "invoice.paid", "data": {}, **fields})


def _pointers(problem: ProblemError) -> list[str]:
    return [e["pointer"] for e in problem.errors]


def test_no_time_is_at_once() -> None:
    assert deliver_at_ms(_event(), NOW) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-12-02T10:00:05Z", "2026-12-02T10:00:05Z"),
        ("2026-12-02T11:00:05+01:00", "2026-12-02T10:00:05Z"),
        ("2026-12-02T10:00:05.250-00:00", "2026-12-02T10:00:05.250Z"),
    ],
)
def test_deliver_at_with_an_offset(text: str, expected: str) -> None:
    assert deliver_at_ms(_event(deliver_at=text), NOW) == parse_iso(expected)


def test_a_past_time_is_kept_as_given() -> None:
    # Its deliveries go at once (the ingest step schedules only what is later than now).
    assert deliver_at_ms(_event(deliver_at="2026-12-01T10:00:00Z"), NOW) == NOW - 86_400_000


@pytest.mark.parametrize("text", ["2026-12-02T10:00:05", "tomorrow", "2026-13-02T10:00:00Z", ""])
def test_deliver_at_without_an_offset_or_malformed_is_refused(text: str) -> None:
    with pytest.raises(ProblemError) as refused:
        _event(deliver_at=text)
    assert refused.value.status == 422 and _pointers(refused.value) == ["/deliver_at"]


def test_deliver_at_30_days_ahead_is_the_bound() -> None:
    bound = NOW + MAX_SCHEDULE_AHEAD_S * 1000
    assert deliver_at_ms(_event(deliver_at="2027-01-01T10:00:00Z"), NOW) == bound
    with pytest.raises(ProblemError) as refused:
        deliver_at_ms(_event(deliver_at="2027-01-01T10:00:00.001Z"), NOW)
    assert refused.value.status == 422 and _pointers(refused.value) == ["/deliver_at"]


@pytest.mark.parametrize("delay", [0, 1, MAX_SCHEDULE_AHEAD_S])
def test_delay_seconds_from_the_time_accepted(delay: int) -> None:
    assert deliver_at_ms(_event(delay_seconds=delay), NOW) == NOW + delay * 1000


@pytest.mark.parametrize("delay", [-1, MAX_SCHEDULE_AHEAD_S + 1, 1.5, "5", True])
def test_delay_seconds_out_of_bounds_or_not_whole_is_refused(delay: object) -> None:
    with pytest.raises(ProblemError) as refused:
        _event(delay_seconds=delay)
    assert refused.value.status == 422 and _pointers(refused.value) == ["/delay_seconds"]


def test_both_is_refused_naming_delay_seconds() -> None:
    event = _event(deliver_at="2026-12-02T10:00:05Z", delay_seconds=5)
    with pytest.raises(ProblemError) as refused:
        deliver_at_ms(event, NOW)
    assert refused.value.status == 422 and _pointers(refused.value) == ["/delay_seconds"]
