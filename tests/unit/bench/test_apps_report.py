"""The arithmetic behind bench/bench_apps.py: B/A ratios of interleaved runs, and one
application's and one endpoint's bytes from used_memory readings."""

from __future__ import annotations

import math

import pytest

from bench.apps_report import (
    MemoryReadings,
    compare,
    comparison_lines,
    memory_figures,
    split_entries,
)


def test_the_ratio_is_b_median_over_a_median_and_each_round_is_paired() -> None:
    c = compare("p99", "ms", [2.0, 4.0, 3.0], [3.0, 4.0, 6.0], target=1.5)
    assert c.a["median"] == 3.0
    assert c.b["median"] == 4.0
    assert c.ratio == pytest.approx(4 / 3)
    assert c.pairs["runs"] == [1.5, 1.0, 2.0]
    assert (c.pairs["low"], c.pairs["high"]) == (1.0, 2.0)
    assert c.met is True


def test_a_ratio_past_the_target_misses_it_and_no_target_has_no_verdict() -> None:
    assert compare("p99", "ms", [1.0], [1.6], target=1.5).met is False
    assert compare("max", "ms", [1.0], [9.0]).met is None


def test_a_figure_of_zero_in_a_gives_no_ratio_rather_than_a_division_error() -> None:
    c = compare("errors", "", [0.0, 0.0], [0.0, 2.0], target=1.5)
    assert math.isnan(c.ratio)
    assert math.isnan(c.pairs["median"])
    assert c.met is False


def test_runs_of_a_and_b_must_pair_up() -> None:
    with pytest.raises(ValueError, match="2 runs of A against 1 of B"):
        compare("p50", "ms", [1.0, 2.0], [1.0])


def test_the_table_names_b_and_shows_the_verdict() -> None:
    lines = comparison_lines([compare("p99", "ms", [2.0, 2.0], [2.2, 2.6], 1.5)], "B: 10 apps")
    assert lines[0].startswith("| figure | A: 1 application | B: 10 apps | B/A |")
    assert lines[2] == (
        "| p99 | 2.00 ms | 2.40 ms (2.20-2.60) | 1.20x | 1.20 (1.10-1.30) | ≤ 1.5x yes |"
    )


def test_memory_per_application_and_per_endpoint_from_the_readings() -> None:
    # 10 applications at 200 B; each one's first endpoint 600 B (100 B of keys the
    # application's endpoints make for it), each later one 500 B.
    readings = MemoryReadings(
        apps=10, before=1000, after_apps=3000, after_rounds=[9000, 14000, 19000]
    )
    figures = memory_figures(readings)
    assert figures.app_alone == 200
    assert figures.endpoint == 500
    assert figures.app_keys == 100
    assert figures.idle_app == 300
    assert figures.app_with_endpoints == 1800


def test_memory_needs_two_rounds_of_endpoints() -> None:
    with pytest.raises(ValueError, match="two rounds"):
        memory_figures(MemoryReadings(apps=10, before=0, after_apps=1, after_rounds=[2]))


def test_a_key_splits_into_its_own_bytes_and_each_entry() -> None:
    assert split_entries(first=100, last=160, entries=3) == (70, 30)
    with pytest.raises(ValueError):
        split_entries(first=100, last=100, entries=1)
