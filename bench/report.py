"""The results as one table: every figure, its baseline beside it, the ratio and the target.

A ratio above 1 always means ours does better than the baseline: ours ÷ baseline for
rates, baseline ÷ ours for latencies and sizes. Against a floor it is below 1 by nature and
reads as "this fraction of what the machine allows".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from bench.stats import Spread, spread

MIB = 1024 * 1024
CPU = "ms CPU"


@dataclass(frozen=True)
class Row:
    section: str
    figure: str
    ours: Spread
    unit: str
    better: Literal["higher", "lower"]
    baseline: Spread | None = None
    baseline_name: str = ""
    target: str = ""
    # Whether the target is met, from the median; None when the figure has no target.
    met: bool | None = None

    @property
    def ratio(self) -> float | None:
        if self.baseline is None:
            return None
        ours, base = self.ours["median"], self.baseline["median"]
        if not ours or not base or math.isnan(ours) or math.isnan(base):
            return None
        return ours / base if self.better == "higher" else base / ours


def _value(spread: Spread | None, unit: str) -> str:
    if spread is None:
        return "—"
    digits = {"ms": 1, "MiB": 1, CPU: 3}.get(unit, 0)

    def fmt(x: float) -> str:
        return "n/a" if math.isnan(x) else f"{x:,.{digits}f}"

    if len(spread["runs"]) < 2 or spread["low"] == spread["high"]:
        return f"{fmt(spread['median'])} {unit}"
    return f"{fmt(spread['median'])} {unit} ({fmt(spread['low'])}-{fmt(spread['high'])})"


def _scaled(spread: Spread, by: float) -> Spread:
    return Spread(
        median=spread["median"] / by,
        low=spread["low"] / by,
        high=spread["high"] / by,
        runs=[r / by for r in spread["runs"]],
    )


def one(value: float) -> Spread:
    """A figure measured once."""
    return Spread(median=value, low=value, high=value, runs=[value])


def _rss(runs: Iterable[dict[str, Any]], prefix: str) -> Spread:
    """Resident memory of every process whose name starts with ``prefix``, added up, in MiB."""
    totals = [sum(b for name, b in run["rss"].items() if name.startswith(prefix)) for run in runs]
    return _scaled(spread([float(t) for t in totals]), MIB)


def _target(spread: Spread, test: Callable[[float], bool]) -> bool:
    return test(spread["median"])


def rows(results: dict[str, Any]) -> list[Row]:
    out: list[Row] = []
    floors, ingest = results.get("floors"), results.get("ingest")
    if floors:
        out += [
            Row("floors", "receiver floor: minimal aiohttp receiver, 64 connections",
                floors["receiver_rps"], "req/s", "higher"),
            Row("floors", "ingest floor: aiohttp + JSON parse + one XADD, 64 connections",
                floors["ingest_rps"], "req/s", "higher"),
        ]  # fmt: skip
    if ingest:
        for rate, figures in ingest["fixed"].items():
            floor = floors["ingest_fixed"][rate] if floors else None
            for key, label in (("p50_ms", "p50"), ("p99_ms", "p99"), ("max_ms", "max")):
                target, met = "", None
                if rate == "1000" and key == "p99_ms":
                    target, met = "≤ 30 ms", _target(figures[key], lambda v: v <= 30)
                out.append(
                    Row("ingest", f"{rate} ev/s x3 fan-out, {label} latency", figures[key], "ms",
                        "lower", floor[key] if floor else None, "floor", target, met)
                )  # fmt: skip
            out.append(
                Row("ingest", f"{rate} ev/s, errors", figures["errors"], "", "lower",
                    floor["errors"] if floor else None, "floor")
            )  # fmt: skip
            for key, label in (("server_cpu_ms", "API"), ("valkey_cpu_ms", "Valkey")):
                out.append(
                    Row("ingest", f"{rate} ev/s, {label} CPU per answered request", figures[key],
                        CPU, "lower", floor[key] if floor else None, "floor")
                )  # fmt: skip
        rate = ingest["sustained"]["rate"]
        floor_rate = floors["ingest_sustained"]["rate"] if floors else None
        met = None
        if floor_rate:
            met = rate["median"] >= 0.5 * floor_rate["median"]
        out.append(
            Row("ingest", "highest rate with p99 < 50 ms and no error", rate, "ev/s", "higher",
                floor_rate, "floor", "≥ 50 % of floor", met)
        )  # fmt: skip
    out += _delivery_rows(results.get("delivery"))
    out += _latency_rows(results.get("latency"), ingest)
    out += _footprint_rows(results.get("footprint"))
    out += _fanout_rows(results.get("fanout"))
    return out


def _delivery_rows(delivery: dict[str, Any] | None) -> list[Row]:
    if not delivery:
        return []
    out = []
    for endpoints, sides in delivery["by_endpoints"].items():
        ours, naive = sides["ours"], sides["naive"]
        out += [
            Row("delivery", f"deliveries/s, {endpoints} endpoint(s), 2 worker processes",
                ours["rate"], "/s", "higher", naive["rate"], "naive", "≥ 3x naive",
                ours["rate"]["median"] >= 3 * naive["rate"]["median"]),
            Row("delivery", f"  worker CPU per delivery, {endpoints} endpoint(s)",
                ours["worker_cpu_ms"], CPU, "lower", naive["worker_cpu_ms"], "naive"),
            Row("delivery", f"  Valkey CPU per delivery, {endpoints} endpoint(s)",
                ours["valkey_cpu_ms"], CPU, "lower", naive["valkey_cpu_ms"], "naive"),
        ]  # fmt: skip
    workers = dict(delivery["by_workers"])
    width = workers.pop("endpoints")
    for count, sides in workers.items():
        out.append(
            Row("scaling", f"deliveries/s, {count} worker process(es), {width} endpoints",
                sides["ours"]["rate"], "/s", "higher", sides["naive"]["rate"], "naive")
        )  # fmt: skip
    return out


def _latency_rows(latency: dict[str, Any] | None, ingest: dict[str, Any] | None) -> list[Row]:
    if not latency:
        return []
    ours, naive = latency["ours"], latency["naive"]
    out = [
        Row("latency", "202 → received p50, 200 ev/s x3", ours["p50_ms"], "ms", "lower",
            naive["p50_ms"], "naive", "≤ 20 ms", _target(ours["p50_ms"], lambda v: v <= 20)),
        Row("latency", "202 → received p99, 200 ev/s x3", ours["p99_ms"], "ms", "lower",
            naive["p99_ms"], "naive", "≤ 100 ms", _target(ours["p99_ms"], lambda v: v <= 100)),
        Row("latency", "202 → received max, 200 ev/s x3", ours["max_ms"], "ms", "lower",
            naive["max_ms"], "naive"),
    ]  # fmt: skip
    runs = latency["runs"]
    out += [
        Row("footprint", "worker RSS, all processes (2 prefork children)",
            _rss(runs["ours"], "worker"), "MiB", "lower", _rss(runs["naive"], "naive"), "naive"),
        Row("footprint", "API RSS, after the latency run", _rss(runs["ours"], "api"), "MiB",
            "lower"),
    ]  # fmt: skip
    if ingest:
        api = _rss([{"rss": ingest["api_rss"]}], "api")
        out.append(Row("footprint", "API RSS, after the ingest runs", api, "MiB", "lower"))
    return out


def _footprint_rows(footprint: dict[str, Any] | None) -> list[Row]:
    if not footprint:
        return []
    in_flight = one(footprint["in_flight_bytes_per_event"])
    parts = footprint["key_bytes"]
    body = footprint["body_bytes"]
    return [
        Row("footprint", "Redis bytes per event in flight (3 pending deliveries, payload excluded)",
            in_flight, "B", "lower", None, "", "≤ 2,048 B",
            _target(in_flight, lambda v: v <= 2048)),
        Row("footprint", "  of which event hash (MEMORY USAGE, body excluded)",
            one(parts["event_hash"]), "B", "lower"),
        Row("footprint", "  of which delivery hashes (MEMORY USAGE)",
            one(parts["delivery_hashes"]), "B", "lower"),
        Row("footprint", f"log outbox bytes per event record ({body} B body inside)",
            one(footprint["outbox_bytes_per_event_record"]), "B", "lower"),
        Row("footprint", "log outbox bytes per state record (its attempt inside)",
            one(footprint["outbox_bytes_per_state_record"]), "B", "lower"),
    ]  # fmt: skip


def _fanout_rows(fanout: dict[str, Any] | None) -> list[Row]:
    if not fanout:
        return []
    out = []
    for width, figures in fanout.items():
        cost = figures["redis_commands_per_event"]
        scripts = cost.get("fcall", 0.0)
        out += [
            Row("scaling", f"fan-out {width}: 202 latency, one event at a time",
                figures["ingest_ms"], "ms", "lower"),
            Row("scaling", f"fan-out {width}: API script calls per accepted event",
                one(scripts), "", "lower", None, "", "1 atomic step", scripts == 1),
            Row("scaling", f"fan-out {width}: API round trips to Redis per accepted event",
                one(cost["round_trips"]), "", "lower"),
            Row("scaling", f"fan-out {width}: commands run inside the script per event",
                one(cost["inside_scripts"]), "", "lower"),
            Row("scaling", f"fan-out {width}: POST → first delivery", figures["first_delivery_ms"],
                "ms", "lower"),
            Row("scaling", f"fan-out {width}: POST → all delivered", figures["all_delivered_ms"],
                "ms", "lower"),
        ]  # fmt: skip
    return out


def _cells(row: Row) -> list[str]:
    ratio = row.ratio
    met = "" if row.met is None else ("yes" if row.met else "NO")
    return [
        row.section,
        row.figure,
        _value(row.ours, row.unit),
        _value(row.baseline, row.unit) + (f" [{row.baseline_name}]" if row.baseline else ""),
        # Two significant digits: 0.0012x and 14x both stay readable.
        "—" if ratio is None else f"{ratio:.2g}x",
        f"{row.target} {met}".strip(),
    ]


HEADER = ["section", "figure", "ours", "baseline", "ratio", "target"]


def text_table(table: list[Row]) -> str:
    cells = [HEADER, *(_cells(r) for r in table)]
    widths = [max(len(c[i]) for c in cells) for i in range(len(HEADER))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in cells
    )


def markdown_table(table: list[Row]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|---|---|---:|---:|---:|---|"]
    lines += ["| " + " | ".join(_cells(r)) + " |" for r in table]
    return "\n".join(lines)
