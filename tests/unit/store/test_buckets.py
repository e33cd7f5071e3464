"""Power-of-two histogram buckets: parsing, merging, quantiles, Prometheus rows."""

from __future__ import annotations

from collections import Counter

import pytest

from webhook_service.store import buckets


def test_parse_takes_only_the_prefixed_numeric_fields() -> None:
    fields = {"d0": "2", "d3": "5", "ds": "9", "a": "1", "d": "4", "dx1": "7"}
    assert buckets.parse(fields, "d") == Counter({0: 2, 3: 5})


def test_merge_adds_windows() -> None:
    merged = buckets.merge([Counter({1: 2}), Counter({1: 1, 4: 3}), Counter()])
    assert merged == Counter({1: 3, 4: 3})


def test_quantile_interpolates_inside_the_bucket() -> None:
    # Ten values in (8, 16] ms: the median sits half way through that bucket.
    assert buckets.quantile({4: 10}, 0.5) == pytest.approx(12.0)
    assert buckets.quantile({4: 10}, 1.0) == pytest.approx(16.0)
    # Bucket 0 holds values up to 1 ms, from 0.
    assert buckets.quantile({0: 4}, 0.5) == pytest.approx(0.5)


def test_quantile_walks_buckets_in_order() -> None:
    counts = {10: 1, 2: 9}  # nine fast answers (2..4 ms), one slow (512..1024 ms)
    assert 2 <= (buckets.quantile(counts, 0.5) or 0) <= 4
    assert 512 <= (buckets.quantile(counts, 0.95) or 0) <= 1024


def test_quantile_without_data_is_none() -> None:
    assert buckets.quantile({}, 0.5) is None
    assert buckets.quantile({3: 0}, 0.5) is None


def test_cumulative_rows_are_seconds_and_never_shrink() -> None:
    rows = buckets.cumulative({0: 1, 2: 2, 40: 5}, top=3)
    assert rows == [(0.001, 1), (0.002, 1), (0.004, 3), (0.008, 3)]
