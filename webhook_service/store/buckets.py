"""Power-of-two histogram buckets, as the attempt counts keep them (store/counts.py).

Bucket ``b`` counts the values (in ms) in ``(2^(b-1), 2^b]``; bucket 0 those up to 1 ms. A
value only ever increments one counter, so a histogram is a handful of hash fields whatever
the traffic, and windows add up by summing counters.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping


def upper_ms(bucket: int) -> int:
    return 1 << bucket


def bucket_of(ms: int) -> int:
    """The bucket a value falls in: the smallest b with ms <= 2^b."""
    return max(0, ms - 1).bit_length()


def parse(fields: Mapping[str, str], prefix: str) -> Counter[int]:
    """The buckets stored as ``<prefix><b>`` among a hash's fields."""
    counts: Counter[int] = Counter()
    for name, value in fields.items():
        suffix = name[len(prefix) :]
        if name.startswith(prefix) and suffix.isdigit():
            counts[int(suffix)] += int(value)
    return counts


def merge(histograms: Iterable[Counter[int]]) -> Counter[int]:
    total: Counter[int] = Counter()
    for histogram in histograms:
        total.update(histogram)
    return total


def quantile(counts: Mapping[int, int], q: float) -> float | None:
    """The q-quantile in ms, interpolated linearly inside its bucket; None without data."""
    total = sum(counts.values())
    if total <= 0:
        return None
    rank = q * total
    seen = 0
    for bucket in sorted(counts):
        count = counts[bucket]
        if count and seen + count >= rank:
            low = 0 if bucket == 0 else upper_ms(bucket - 1)
            return low + (upper_ms(bucket) - low) * max(0.0, rank - seen) / count
        seen += count
    return float(upper_ms(max(counts)))


def cumulative(counts: Mapping[int, int], top: int) -> list[tuple[float, int]]:
    """(upper bound in seconds, values at or under it) for buckets 0..top, as Prometheus
    wants them; values above 2^top ms only count in the total (its +Inf bucket)."""
    running = 0
    rows = []
    for bucket in range(top + 1):
        running += counts.get(bucket, 0)
        rows.append((upper_ms(bucket) / 1000, running))
    return rows
