"""Endpoint stats windows: counters from the minute/hour hashes, totals and rates."""

from __future__ import annotations

from collections import Counter

import pytest

from webhook_service.store.stats import Window


def test_from_hash_reads_the_counters_record_lua_keeps() -> None:
    window = Window.from_hash({"a": "5", "s": "3", "ds": "3", "df": "1", "d4": "2", "d6": "3"})
    assert (window.attempts, window.attempts_succeeded) == (5, 3)
    assert (window.succeeded, window.failed, window.deliveries) == (3, 1, 4)
    assert window.durations == Counter({4: 2, 6: 3})
    assert window.success_rate == 0.75 and window.attempt_success_rate == 0.6


def test_an_empty_window_has_no_rates() -> None:
    empty = Window.from_hash({})
    assert empty.deliveries == 0 and empty.success_rate is None
    assert empty.attempt_success_rate is None and empty.latency_ms(0.5) is None


def test_total_adds_counts_and_latency_buckets() -> None:
    total = Window.total(
        [Window.from_hash({"a": "1", "s": "1", "ds": "1", "d2": "1"}),
         Window.from_hash({"a": "3", "df": "1", "d2": "1", "d9": "2"}), Window()]
    )  # fmt: skip
    assert (total.attempts, total.succeeded, total.failed) == (4, 1, 1)
    assert total.durations == Counter({2: 2, 9: 2})
    assert total.latency_ms(0.5) == pytest.approx(4.0)  # the top of the (2, 4] ms bucket
    assert 256 <= (total.latency_ms(0.95) or 0) <= 512
