"""An endpoint's recent health, from counters kept per minute and per hour (added by the
delivering processes, store/counts.py: up to WEBHOOK_COUNTS_INTERVAL behind).

Nothing is scanned: the last hour is 60 small minute hashes, the last day 24 hour hashes
(the current clock hour and the 23 before it), the backlog one ZCARD of the endpoint's
pending index. The counters expire by themselves (``keys.py``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import cast

from redis.asyncio import Redis

from webhook_service.store import buckets, keys

MINUTE_MS = 60_000
HOUR_MS = 3_600_000
MINUTES = 60
HOURS = 24


@dataclass(frozen=True)
class Window:
    attempts: int = 0
    attempts_succeeded: int = 0  # attempts answered 2xx
    succeeded: int = 0  # deliveries that ended succeeded
    failed: int = 0  # deliveries that ended failed (their budget spent)
    durations: Counter[int] = field(default_factory=Counter)  # power-of-two ms buckets

    @classmethod
    def from_hash(cls, raw: Mapping[str, str]) -> Window:
        return cls(
            attempts=int(raw.get("a", 0)),
            attempts_succeeded=int(raw.get("s", 0)),
            succeeded=int(raw.get("ds", 0)),
            failed=int(raw.get("df", 0)),
            durations=buckets.parse(raw, "d"),
        )

    @classmethod
    def total(cls, windows: Iterable[Window]) -> Window:
        parts = list(windows)
        return cls(
            attempts=sum(w.attempts for w in parts),
            attempts_succeeded=sum(w.attempts_succeeded for w in parts),
            succeeded=sum(w.succeeded for w in parts),
            failed=sum(w.failed for w in parts),
            durations=buckets.merge(w.durations for w in parts),
        )

    @property
    def deliveries(self) -> int:
        return self.succeeded + self.failed

    @property
    def success_rate(self) -> float | None:
        return self.succeeded / self.deliveries if self.deliveries else None

    @property
    def attempt_success_rate(self) -> float | None:
        return self.attempts_succeeded / self.attempts if self.attempts else None

    def latency_ms(self, q: float) -> float | None:
        return buckets.quantile(self.durations, q)


@dataclass(frozen=True)
class EndpointStats:
    last_hour: Window
    last_day: Window
    minutes: list[tuple[int, Window]]  # (start ms, counts), oldest first
    backlog: int  # deliveries still pending
    last_success_ms: int | None
    last_failure_ms: int | None
    last_failure_code: int | None
    last_failure_error: str | None


def _int(raw: Mapping[str, str], name: str) -> int | None:
    value = raw.get(name)
    return int(value) if value else None


async def endpoint_stats(redis: Redis, endpoint_id: str, now_ms: int) -> EndpointStats:
    minute, hour = now_ms // MINUTE_MS, now_ms // HOUR_MS
    minute_starts = [m * MINUTE_MS for m in range(minute - MINUTES + 1, minute + 1)]
    async with redis.pipeline(transaction=False) as pipe:
        for start in minute_starts:
            pipe.hgetall(keys.endpoint_minute(endpoint_id, start // MINUTE_MS))
        for h in range(hour - HOURS + 1, hour + 1):
            pipe.hgetall(keys.endpoint_hour(endpoint_id, h))
        pipe.hgetall(keys.endpoint_stats(endpoint_id))
        pipe.get(keys.backlog(endpoint_id))
        replies = await pipe.execute()
    minutes = [Window.from_hash(raw) for raw in replies[:MINUTES]]
    hours = [Window.from_hash(raw) for raw in replies[MINUTES : MINUTES + HOURS]]
    last = cast(dict[str, str], replies[-2])
    return EndpointStats(
        last_hour=Window.total(minutes),
        last_day=Window.total(hours),
        minutes=list(zip(minute_starts, minutes, strict=True)),
        backlog=max(0, int(replies[-1] or 0)),
        last_success_ms=_int(last, "last_success"),
        last_failure_ms=_int(last, "last_failure"),
        last_failure_code=_int(last, "last_failure_code"),
        last_failure_error=last.get("last_failure_error") or None,
    )
