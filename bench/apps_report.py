"""The arithmetic of bench/bench_apps.py, kept apart so that it can be tested alone: the B/A
ratios of interleaved runs, and what ``used_memory`` readings taken while applications and
their endpoints went in say about one application and one endpoint."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from bench.stats import Spread, spread


@dataclass(frozen=True)
class Comparison:
    """One figure in both setups: A (one application) and B (many), each run once a round."""

    figure: str
    unit: str
    a: Spread
    b: Spread
    # B's run over A's run of the same round: how steady the ratio is from round to round.
    pairs: Spread
    target: float | None = None  # the most B/A may be

    @property
    def ratio(self) -> float:
        """B's median over A's."""
        a, b = self.a["median"], self.b["median"]
        if math.isnan(a) or math.isnan(b) or a <= 0:
            return math.nan
        return b / a

    @property
    def met(self) -> bool | None:
        if self.target is None:
            return None
        return not math.isnan(self.ratio) and self.ratio <= self.target


def compare(
    figure: str,
    unit: str,
    a_runs: Sequence[float],
    b_runs: Sequence[float],
    target: float | None = None,
) -> Comparison:
    """``a_runs[i]`` and ``b_runs[i]`` ran in the same round, one after the other."""
    if len(a_runs) != len(b_runs):
        raise ValueError(f"{len(a_runs)} runs of A against {len(b_runs)} of B")
    pairs = [b / a if a > 0 else math.nan for a, b in zip(a_runs, b_runs, strict=True)]
    return Comparison(figure, unit, spread(a_runs), spread(b_runs), spread(pairs), target)


def _value(s: Spread, unit: str) -> str:
    digits = 3 if unit == "ms CPU" else 2
    if math.isnan(s["median"]):
        return "n/a"
    text = f"{s['median']:.{digits}f}"
    if unit:
        text += f" {unit}"
    if s["low"] != s["high"]:
        text += f" ({s['low']:.{digits}f}-{s['high']:.{digits}f})"
    return text


def _cells(c: Comparison) -> list[str]:
    pairs = c.pairs
    steady = ""
    if not math.isnan(pairs["median"]):
        steady = f"{pairs['median']:.2f} ({pairs['low']:.2f}-{pairs['high']:.2f})"
    target = "" if c.target is None else f"≤ {c.target:g}x " + ("yes" if c.met else "NO")
    ratio = "n/a" if math.isnan(c.ratio) else f"{c.ratio:.2f}x"
    return [c.figure, _value(c.a, c.unit), _value(c.b, c.unit), ratio, steady, target]


COMPARISON_HEADER = [
    "figure", "A: 1 application", "B: many", "B/A", "B/A round by round", "target",
]  # fmt: skip


def comparison_lines(comparisons: Sequence[Comparison], b_label: str) -> list[str]:
    """A Markdown table, B's column named ``b_label``."""
    header = [*COMPARISON_HEADER[:2], b_label, *COMPARISON_HEADER[3:]]
    lines = ["| " + " | ".join(header) + " |", "|---|---:|---:|---:|---:|---|"]
    return lines + ["| " + " | ".join(_cells(c)) + " |" for c in comparisons]


@dataclass(frozen=True)
class MemoryReadings:
    """``used_memory`` (after a settle) while ``apps`` applications went in, then their
    endpoints one round at a time: round k gave every one of them its k-th endpoint."""

    apps: int
    before: int
    after_apps: int
    after_rounds: Sequence[int]


@dataclass(frozen=True)
class MemoryFigures:
    app_alone: float  # an application with no endpoint: its hash, uid mapping, apps entry
    # what an application's first endpoint adds past any later one's: the application's
    # own keys its endpoints make (its endpoints zset, its subscription set)
    app_keys: float
    endpoint: float  # an endpoint of an application that has one already
    app_with_endpoints: float  # an application and all its endpoints

    @property
    def idle_app(self) -> float:
        """An application with no events: its record and the keys its endpoints live in."""
        return self.app_alone + self.app_keys


def memory_figures(readings: MemoryReadings) -> MemoryFigures:
    rounds = list(readings.after_rounds)
    if len(rounds) < 2 or readings.apps <= 0:
        raise ValueError("needs applications and at least two rounds of endpoints")
    n = readings.apps
    steps = [
        now - then for then, now in zip([readings.after_apps, *rounds[:-1]], rounds, strict=True)
    ]
    endpoint = statistics.mean(steps[1:]) / n
    return MemoryFigures(
        app_alone=(readings.after_apps - readings.before) / n,
        app_keys=steps[0] / n - endpoint,
        endpoint=endpoint,
        app_with_endpoints=(rounds[-1] - readings.before) / n,
    )


def split_entries(first: float, last: float, entries: int) -> tuple[float, float]:
    """A key's own bytes and each entry's, from its size with one entry and with
    ``entries``: (own, per entry)."""
    if entries < 2:
        raise ValueError("needs two sizes of the key")
    each = (last - first) / (entries - 1)
    return first - each, each
