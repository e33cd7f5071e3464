"""When to try again: the retry schedule with jitter, and what a receiver asks of us."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from email.utils import parsedate_to_datetime

# Receivers that say "slow down" get the larger of our schedule and their Retry-After,
# but never more than this many times our schedule, so one header cannot park a delivery.
RETRY_AFTER_CAP = 2.0
THROTTLE_STATUSES = frozenset({429, 502, 503, 504})


@dataclass(frozen=True)
class RetryPolicy:
    schedule: Sequence[float]  # delay before attempt 1, 2, ...; its length is the attempt budget
    jitter: float = 0.2
    # Timeouts and 429 mean the receiver is overloaded: wait at least this long.
    throttle_floor: float = 60.0

    def for_schedule(self, schedule: Sequence[float] | None) -> RetryPolicy:
        """This policy with an endpoint's own schedule (None: this one's); jitter and the
        throttle floor stay the operator's."""
        return self if schedule is None else replace(self, schedule=schedule)

    def delay_after(
        self,
        attempts_done: int,
        *,
        status: int | None = None,
        error: str | None = None,
        retry_after: float | None = None,
        rng: random.Random | None = None,
    ) -> float | None:
        """Seconds until the next attempt, or None when the schedule is spent."""
        if attempts_done >= len(self.schedule):
            return None
        base = self.schedule[attempts_done]
        spread = (rng or random).uniform(-self.jitter, self.jitter)
        delay = base * (1 + spread)
        if status == 429 or error == "timeout":
            delay = max(delay, self.throttle_floor)
        if retry_after is not None and status in THROTTLE_STATUSES:
            delay = max(delay, min(retry_after, RETRY_AFTER_CAP * delay))
        return delay


def parse_retry_after(value: str | None, now_s: float) -> float | None:
    """Seconds from a Retry-After header: delta-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(value)
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, moment.timestamp() - now_s)
