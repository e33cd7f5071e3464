"""store/states.py shown_status: a pending delivery is shown scheduled only while it has
never been attempted and is still due at the time it was scheduled for."""

from __future__ import annotations

import pytest

from webhook_service.store.states import Status, shown_status


@pytest.mark.parametrize(
    ("status", "attempts", "next_at", "sched", "shown"),
    [
        ("pending", 0, "1000", "1000", "scheduled"),
        ("pending", 0, "1000", None, "pending"),  # sent at once
        ("pending", 1, "5000", "1000", "pending"),  # attempted: a retry waits
        ("pending", 0, "7000", "1000", "pending"),  # cancelled, then retried by an admin
        ("failed", 0, None, "1000", "failed"),  # cancelled
        ("succeeded", 1, None, "1000", "succeeded"),
    ],
)
def test_shown(
    status: Status, attempts: int, next_at: str | None, sched: str | None, shown: Status
) -> None:
    assert shown_status(status, attempts, next_at, sched) == shown
