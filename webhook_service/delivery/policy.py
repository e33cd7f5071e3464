"""An endpoint's own retry policy: its schedule and its request timeout, each overriding the
global setting (WEBHOOK_RETRY_SCHEDULE, WEBHOOK_REQUEST_TIMEOUT) when set.

The bounds keep one endpoint from holding a delivery, a worker's send slot or a lease for
long: a delivery lives in Redis until its schedule is spent, and its lease covers the
request (common.lua lease_one adds the endpoint's timeout to the lease)."""

from __future__ import annotations

from collections.abc import Sequence

# At most this many attempts, spread over at most a week (the delays' sum, before jitter).
MAX_ATTEMPTS = 20
MAX_SCHEDULE_SECONDS = 7 * 86_400
MIN_TIMEOUT_SECONDS = 1.0
MAX_TIMEOUT_SECONDS = 60.0


def check_schedule(schedule: Sequence[float]) -> Sequence[float]:
    """The schedule, or a ValueError saying which bound it passes (its length and each
    delay's sign are the model's: api/models.py RetrySchedule). The same form as
    WEBHOOK_RETRY_SCHEDULE: the delay before each attempt, the first 0, its length the
    attempt budget."""
    if schedule and schedule[0] != 0:
        # The first attempt goes out as soon as the event is stored, as the global one's.
        raise ValueError("the first entry is the first attempt and must be 0")
    total = sum(schedule)  # a float sum: math.fsum raises past the largest float
    if total > MAX_SCHEDULE_SECONDS:
        raise ValueError(
            f"the delays add up to {total:g} s, over {MAX_SCHEDULE_SECONDS} s (7 days)"
        )
    return schedule
