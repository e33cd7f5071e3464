"""Percentiles of one run and the median-with-spread of repeated runs."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import TypedDict


class Spread(TypedDict):
    median: float
    low: float
    high: float
    runs: list[float]


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile: always a value that was actually observed."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def spread(runs: Sequence[float]) -> Spread:
    """Median of the repeats, with the lowest and highest so the noise stays visible."""
    kept = [r for r in runs if not math.isnan(r)]
    if not kept:
        return Spread(median=math.nan, low=math.nan, high=math.nan, runs=list(runs))
    return Spread(median=statistics.median(kept), low=min(kept), high=max(kept), runs=[*runs])
