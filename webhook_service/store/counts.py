"""What the attempts add up to, counted by the process that made them and added to Redis a
batch at a time: the cluster metrics' attempt classes, durations and latencies
(store/telemetry.py) and each endpoint's per-minute and per-hour windows and last outcomes
(store/stats.py).

Why not in the record script, as the states are: these were 16 of the 35 commands each
delivery wrote, 1.5 KB of its 3.7 KB of AOF, and their only readers are dashboards, alerts
and the stats route, which can be a second behind. The same goes for the count of
deliveries an attempt made final (``outcome:<status>``, webhook_deliveries_total), which
record.lua added until each of its calls was weighed (a redis.call costs Valkey 2-4 us
beyond the command itself); the other steps that end deliveries (a lease finding its
endpoint gone, an application's end, a cancel) still count theirs themselves.

What the cost is: a process killed with counts not yet added loses them (at most
``WEBHOOK_COUNTS_INTERVAL`` of its attempts; the log keeps every attempt all the same), and
``last_success_at`` may step back by that much when two processes add theirs in the other
order. A batch Redis refuses is kept and added with the next one. This module only counts;
``DeliveryStore.add_counts`` writes a batch, one MULTI/EXEC per bucket (``by_bucket``: an
endpoint's keys are of its bucket, and so are the metrics its attempts count in), and the
delivery engine decides when.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from webhook_service.store import buckets, keys
from webhook_service.store.deliveries import RecordOutcome
from webhook_service.store.states import FINAL_STATUSES


def _bucket(key: str) -> int:
    bucket = keys.bucket_of_key(key)
    if bucket is None:
        raise ValueError(f"{key} is in no bucket")
    return bucket


@dataclass
class AttemptCounts:
    """Counts not yet in Redis: hash key -> field -> how much to add; the expiry of each
    window key; the last outcome fields of each endpoint's stats hash."""

    added: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    expiry: dict[str, int] = field(default_factory=dict)
    last: dict[str, dict[str, str | int]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.added or self.last)

    def note(
        self,
        *,
        endpoint_id: str,
        status_class: str,
        status: RecordOutcome,
        duration_ms: int,
        latency_ms: int,
        code: int | None,
        error: str | None,
        now_ms: int,
    ) -> None:
        """One recorded attempt: its answer's class, the delivery's status after it, how long
        it took, and how long since the delivery was made (counted only for a 2xx)."""
        ok = status_class == "2xx"
        metrics = self.added[keys.metrics(keys.bucket_of(endpoint_id))]
        duration = max(0, duration_ms)
        metrics[f"attempts:{status_class}"] += 1
        metrics[f"duration:{buckets.bucket_of(duration)}"] += 1
        metrics["duration_sum_ms"] += duration
        if status.value in FINAL_STATUSES:
            metrics[f"outcome:{status.value}"] += 1
        if ok:
            latency = max(0, latency_ms)
            metrics[f"latency:{buckets.bucket_of(latency)}"] += 1
            metrics["latency_sum_ms"] += latency

        fields = ["a", f"d{buckets.bucket_of(duration)}"]
        if ok:
            fields.append("s")
        if status is RecordOutcome.SUCCEEDED:
            fields.append("ds")
        elif status is RecordOutcome.FAILED:
            fields.append("df")
        windows = (
            (keys.endpoint_minute(endpoint_id, now_ms // 60_000), keys.WINDOW_TTL["minute"]),
            (keys.endpoint_hour(endpoint_id, now_ms // 3_600_000), keys.WINDOW_TTL["hour"]),
        )
        for key, ttl in windows:
            self.added[key].update(fields)
            self.expiry[key] = ttl

        last = self.last.setdefault(keys.endpoint_stats(endpoint_id), {})
        if ok:
            last["last_success"] = now_ms
        else:
            last.update(
                last_failure=now_ms,
                last_failure_code="" if code is None else code,
                last_failure_error=error or "",
            )

    def by_bucket(self) -> dict[int, AttemptCounts]:
        """The counts split by the bucket of their keys: one atomic step each."""
        parts: defaultdict[int, AttemptCounts] = defaultdict(AttemptCounts)
        for key, counts in self.added.items():
            parts[_bucket(key)].added[key] = counts
        for key, ttl in self.expiry.items():
            parts[_bucket(key)].expiry[key] = ttl
        for key, fields in self.last.items():
            parts[_bucket(key)].last[key] = fields
        return dict(parts)

    def forget(self, part: AttemptCounts) -> None:
        """Drop what ``part`` (one of ``by_bucket``'s) holds: it was added."""
        for key in part.added:
            self.added.pop(key, None)
        for key in part.expiry:
            self.expiry.pop(key, None)
        for key in part.last:
            self.last.pop(key, None)

    def take(self) -> AttemptCounts:
        """What is counted so far, leaving this empty."""
        taken = AttemptCounts(self.added, self.expiry, self.last)
        self.added, self.expiry, self.last = defaultdict(Counter), {}, {}
        return taken

    def put_back(self, batch: AttemptCounts) -> None:
        """A batch Redis did not take, merged under what was counted since (newer last
        outcomes win)."""
        for key, counts in batch.added.items():
            self.added[key].update(counts)
        self.expiry = {**batch.expiry, **self.expiry}
        for key, fields in batch.last.items():
            self.last[key] = {**fields, **self.last.get(key, {})}
