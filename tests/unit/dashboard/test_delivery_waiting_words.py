"""What the delivery pages (the dashboard's and the portal's) say a delivery not yet final
waits for: words true whatever sends it, a worker or in tick mode the next tick."""

from __future__ import annotations

from typing import Any

from webhook_service.dashboard.delivery_pages import waiting_for
from webhook_service.timeutil import parse_iso

NOW = parse_iso("2026-12-02T09:00:00Z")


def _delivery(status: str, next_attempt_at: str | None, attempts: int = 1) -> dict[str, Any]:
    return {"status": status, "next_attempt_at": next_attempt_at, "attempts": attempts}


def test_a_retry_waiting_says_when_its_next_attempt_is() -> None:
    waiting = _delivery("pending", "2026-12-02T09:33:05.120Z")
    assert waiting_for(waiting, NOW) == "Next attempt at 2026-12-02 09:33:05Z."


def test_a_scheduled_one_says_what_for() -> None:
    scheduled = _delivery("scheduled", "2026-12-03T08:00:00Z", attempts=0)
    assert waiting_for(scheduled, NOW) == "Scheduled for 2026-12-03 08:00:00Z."


def test_one_due_is_being_sent_or_next_to_be() -> None:
    # Its time past (a first attempt, a retry come due, a send under way): the API does not
    # say whether a sender holds it.
    for attempts in (0, 2):
        due = _delivery("pending", "2026-12-02T08:59:58Z", attempts)
        assert waiting_for(due, NOW) == "Due since 2026-12-02 08:59:58Z: being sent, or next to be."
    assert waiting_for(_delivery("pending", "2026-12-02T09:00:00Z"), NOW) == (
        "Due since 2026-12-02 09:00:00Z: being sent, or next to be."
    )
    assert waiting_for(_delivery("pending", None), NOW) == "Due: being sent, or next to be."


def test_a_final_one_waits_for_nothing_and_none_names_a_worker() -> None:
    for status in ("succeeded", "failed", "disabled"):
        assert waiting_for(_delivery(status, None), NOW) is None
    for status, at in (
        ("pending", "2026-12-02T10:00:00Z"),
        ("pending", None),
        ("scheduled", "2026-12-02T10:00:00Z"),
    ):
        words = waiting_for(_delivery(status, at), NOW)
        assert words is not None and "worker" not in words.lower()
