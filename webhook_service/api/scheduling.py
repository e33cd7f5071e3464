"""Scheduled delivery: the time an event's ``deliver_at`` or ``delay_seconds`` names.

The ingest step (store/lua/ingest.lua, common.lua create_event) puts its deliveries in the
due set at that time instead of now, with no wake-up; the scheduler's due claim (every
WEBHOOK_SCHEDULER_INTERVAL, store/due.py) sends them when it comes."""

from __future__ import annotations

from webhook_service.api.models import MAX_SCHEDULE_AHEAD_S, EventIn
from webhook_service.api.problems import ProblemError
from webhook_service.timeutil import parse_iso

_AHEAD_MS = MAX_SCHEDULE_AHEAD_S * 1000


def _refused(field: str, detail: str) -> ProblemError:
    return ProblemError(
        422,
        "An event's deliveries may be scheduled at most 30 days ahead, by deliver_at or "
        "delay_seconds, not both.",
        errors=[{"pointer": f"/{field}", "detail": detail}],
    )


def deliver_at_ms(event: EventIn, created_ms: int) -> int | None:
    """When the deliveries of ``event``, accepted at ``created_ms``, are due (None: at
    once, no time given). A time now or past is kept as given: its deliveries go at once.
    The model has checked each field alone; here what needs both, or the time."""
    if event.deliver_at is not None and event.delay_seconds is not None:
        raise _refused("delay_seconds", "give deliver_at or delay_seconds, not both")
    if event.delay_seconds is not None:
        return created_ms + event.delay_seconds * 1000
    if event.deliver_at is None:
        return None
    at = parse_iso(event.deliver_at)
    if at - created_ms > _AHEAD_MS:
        raise _refused("deliver_at", "at most 30 days ahead")
    return at
