"""The delivery log's benchmarks (issue 15): today's release against this tree, in one run.

``python -m bench.bench_log [--events 100000] [--compare-events 4000] [--rate 1000]
[--seconds 20] [--only writes,rewrite,memory,visible] [--keep]``: about 11 minutes as given, 9 of
them the 100 000 delivered events of the memory part (this machine's two cores deliver
200-300 events a second with fan-out 3); ``--events 10000 --compare-events 1000 --seconds
6`` in 2 minutes for a look. ``--only`` measures those parts again and keeps the others in
``bench/results/log.json``.

Two stacks, one after the other, each on a Valkey of its own started with the same flags
(webhook_service/embedded.py: AOF ``everysec``, ``hash-max-listpack-value`` 512): first the
release (commit ``release_tree.RELEASE``, unpacked with ``git archive`` into the run's temp
dir, its processes run from there on the same venv), then this tree, its log in SQLite in
the rig's dir and ``WEBHOOK_HOT_SECONDS=0``, so that finished work leaves Redis as soon as
the log holds it. Every event has a 100-byte body and fans out to 3 endpoints; 2 worker
processes deliver.

- **writes**, both stacks: ``--compare-events`` events accepted with the workers paused,
  then delivered; AOF growth (bench/aof.py) and Valkey CPU over each half, per event and
  per delivery, and which commands took the bytes. Everything the service writes counts:
  the ingest script and the shipper's trim of its record; the lease, the record, the due
  set, the shipper's trim and the release of what finished. No automatic AOF rewrite
  meanwhile (it would reset the files measured). Then half as many events at 300 ev/s
  with the workers running: AOF and CPU per delivered event.
- **rewrite**, both stacks and the ingest floor (bench/floors.py) on this tree's Valkey: an
  open loop at ``--rate`` for ``--seconds`` with the workers paused, a ``BGREWRITEAOF`` at
  half time that is not waited for; p99, max, errors, CPU per answer; this tree also
  without a rewrite.
- **memory**, this tree: ``used_memory`` before and after ``--events`` delivered events,
  sent as fast as the workers keep up; then its scheduler again with the default
  WEBHOOK_HOT_SECONDS: what one finished event holds in Redis until the window passes. At
  the memory run's rate the window holds rate x WEBHOOK_HOT_SECONDS of them.

- **visible**, this tree: events at 300 ev/s for ``--seconds`` with the workers running,
  the SQL log's attempts counted every 50 ms meanwhile: how long after its receiver got a
  delivery its attempt is in the log (the record, the outbox, the shipper's next batch).
  The k-th arrival is taken as visible once the log holds k attempts more than at the
  start: the shipper writes in the order the records were made, which is close to the
  order the receiver saw them.

Prints every figure with its ratio and target; writes ``bench/results/log.json`` and
``log.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import math
import os
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import redis
import sqlalchemy as sa
import uvloop

from bench import aof, release_tree
from bench.floors import start_ingest_floor
from bench.footprint import BODY_BYTES
from bench.http_load import RequestFactory, closed_loop, open_loop
from bench.procs import Child
from bench.report import CPU, MIB, Row, markdown_table, one, text_table
from bench.rig import Rig, Workers
from bench.run import RESULTS, machine, save_json, scratch
from webhook_service.config import Settings
from webhook_service.history import tables
from webhook_service.history.database import sync_engine
from webhook_service.store import keys

FANOUT = 3
WORKERS = 2
_LOAD_CONNECTIONS = 32
_EVENT_TYPE = "bench.log"
# The paced runs: events sent at a time, and the deliveries due past which they wait (a few
# seconds of the workers' work).
_CHUNK = 500
_BACKLOG = 3000
# Events/s the 2 workers keep up with on this machine (200 is the latency phase's rate).
STEADY_RATE = 300.0
# What the issue asks (its "Benchmarks" section); the release's own figures are in its text.
AOF_EVENT_TARGET = 1500
AOF_DELIVERY_TARGET = 800
CPU_SHARE_TARGET = 0.6
MEMORY_GROWTH_TARGET = 0.10
REWRITE_P99_TARGET = 5.0
VISIBLE_TARGET_S = 1.0
PARTS = ("writes", "rewrite", "memory", "visible")


@dataclasses.dataclass(frozen=True)
class Sizes:
    events: int  # delivered in the memory run
    compare_events: int  # accepted, then delivered, on each stack for the writes
    hot_events: int  # delivered while the default hot window holds them
    rate: float  # events/s through the rewrite
    seconds: float


def _log(started: float, text: str) -> None:
    print(f"[{time.monotonic() - started:6.1f}s] {text}", flush=True)


def _memory(rig: Rig) -> int:
    used: int = rig.redis.info("memory")["used_memory"]
    return used


async def _stack(rig: Rig, name: str) -> tuple[RequestFactory, Workers]:
    """The run's endpoints on a freshly emptied store, its worker paused, one warm-up event
    delivered (scripts loaded, connections open) and everything of it settled."""
    rig.reset()
    await rig.receiver.reset()
    await rig.endpoints([f"{name}-{n}" for n in range(FANOUT)], _EVENT_TYPE)
    request = rig.event_request(_EVENT_TYPE, body_bytes=BODY_BYTES)
    pool = await rig.workers("ours", WORKERS)
    await closed_loop(rig.api_port, request, connections=8, count=100)
    await rig.receiver.wait_for(100 * FANOUT, stall=30.0)
    await _finished(rig)
    await rig.pause(pool)
    await rig.receiver.reset()
    rig.settle()
    return request, pool


async def _finished(rig: Rig) -> None:
    """No delivery in flight nor wake-up queued, and (with a log) everything shipped and
    let go of. The workers must be running."""
    await rig.until_idle()
    if rig.has_log:
        await rig.until_released()


async def writes(rig: Rig, events: int) -> dict[str, Any]:
    """AOF bytes and Valkey CPU per accepted event, then per delivery, and what took the
    bytes of each (bench/aof.py ``costs``). Then the same with the workers running and
    events at a rate they keep up with, as in production: per delivered event, since its
    ingest and its deliveries then interleave."""
    request, pool = await _stack(rig, "writes")
    with aof.no_auto_rewrite(rig.redis):
        start = aof.usage(rig.redis)
        clock = time.monotonic()
        load = await closed_loop(
            rig.api_port, request, connections=_LOAD_CONNECTIONS, count=events, drain_timeout=300.0
        )
        accepted = load.statuses[202]
        # The shipper's trim of the event records belongs to ingest.
        await rig.until_shipped()
        ingested = aof.usage(rig.redis)
        ingest_seconds, clock = time.monotonic() - clock, time.monotonic()
        await rig.resume(pool)
        deliveries = accepted * FANOUT
        stats = await rig.receiver.wait_for(deliveries)
        await _finished(rig)
        delivered = aof.usage(rig.redis)
        delivery_seconds = time.monotonic() - clock
        steady = await open_loop(
            rig.api_port, request, STEADY_RATE, max(1.0, events / 2 / STEADY_RATE)
        )
        steady_events = steady.statuses[202]
        await rig.receiver.wait_for(deliveries + steady_events * FANOUT)
        await _finished(rig)
        done = aof.usage(rig.redis)
        await rig.pause(pool)
    if (done - start).rewrites:
        raise RuntimeError("an AOF rewrite ran during the writes run; its figures are void")
    ingest, delivery, both = ingested - start, delivered - ingested, done - delivered
    written = aof.appended(aof.appendonly_dir(rig.redis))
    return {
        "events": accepted,
        "deliveries": deliveries,
        "received": stats["received"],
        "aof_bytes_per_event": ingest.aof_bytes / accepted,
        "aof_bytes_per_delivery": delivery.aof_bytes / deliveries,
        "valkey_cpu_ms_per_event": 1000 * ingest.cpu_seconds / accepted,
        "valkey_cpu_ms_per_delivery": 1000 * delivery.cpu_seconds / deliveries,
        "ingest_seconds": ingest_seconds,
        "delivery_seconds": delivery_seconds,
        "steady_events": steady_events,
        "steady_aof_bytes_per_event": both.aof_bytes / max(1, steady_events),
        "steady_valkey_cpu_ms_per_event": 1000 * both.cpu_seconds / max(1, steady_events),
        "ingest_costs": aof.costs(written[start.aof_bytes : ingested.aof_bytes]),
        "delivery_costs": aof.costs(written[ingested.aof_bytes : delivered.aof_bytes]),
        "steady_costs": aof.costs(written[delivered.aof_bytes : done.aof_bytes]),
    }


async def open_run(
    rig: Rig,
    port: int,
    request: RequestFactory,
    sizes: Sizes,
    processes: Sequence[Child],
    rewrite: bool = True,
) -> dict[str, Any]:
    """Open loop at ``sizes.rate`` for ``sizes.seconds``, with a BGREWRITEAOF at half time
    unless not ``rewrite``: the latencies, the CPU ``processes`` and Valkey spent per answer,
    how long the rewrite ran and its fork took. The rewrite is not waited for, nor settled."""
    rig.settle()
    # What earlier runs (or anyone else) left to be written back is on the disk first:
    # else the AOF's fsync queues behind it, and past 2 s Valkey stops answering until it
    # is done (a 2 s stall of the floor's own, not the rewrite's).
    await asyncio.to_thread(os.sync)
    rewrites = int(rig.redis.info("persistence")["aof_rewrites"])
    rewrite_ms = math.nan

    async def midway() -> None:
        nonlocal rewrite_ms
        await asyncio.sleep(sizes.seconds / 2)
        began = time.monotonic()
        with contextlib.suppress(redis.ResponseError):  # an automatic one runs already
            await asyncio.to_thread(rig.redis.bgrewriteaof)
        while True:
            persistence = await asyncio.to_thread(rig.redis.info, "persistence")
            if not persistence["aof_rewrite_in_progress"]:
                break
            await asyncio.sleep(0.05)
        rewrite_ms = 1000 * (time.monotonic() - began)

    cpu = {child.name: child.cpu_seconds() for child in processes}
    valkey_cpu = rig.valkey_cpu()
    rewriting = asyncio.create_task(midway()) if rewrite else None
    load = await open_loop(port, request, sizes.rate, sizes.seconds, drain_timeout=10.0)
    answered = max(1, load.completed)
    spent = {
        f"{child.name}_cpu_ms": 1000 * (child.cpu_seconds() - cpu[child.name]) / answered
        for child in processes
    }
    spent["valkey_cpu_ms"] = 1000 * (rig.valkey_cpu() - valkey_cpu) / answered
    if rewriting is not None:
        await rewriting
    stats = rig.redis.info("stats")
    return {
        **load.summary(),
        **spent,
        "statuses": {str(status): n for status, n in sorted(load.statuses.items())},
        "rewrite_ms": rewrite_ms,
        "rewrites": int(rig.redis.info("persistence")["aof_rewrites"]) - rewrites,
        "fork_ms": int(stats["latest_fork_usec"]) / 1000 if rewrite else math.nan,
        "used_memory": _memory(rig),
    }


async def ingest_runs(rig: Rig, sizes: Sizes, *, without: bool) -> dict[str, Any]:
    """The service's API, each event to 3 endpoints, the workers paused: only ingest runs
    (and, on this tree, the shipper, in the scheduler). Through a rewrite; first the same
    without one, if ``without``, to tell what the rewrite adds."""
    request, _pool = await _stack(rig, "rewrite")
    processes = [rig.children["api"], rig.children["scheduler"]]
    out = {}
    if without:
        out["without"] = await open_run(rig, rig.api_port, request, sizes, processes, False)
    out["through"] = await open_run(rig, rig.api_port, request, sizes, processes)
    return out


async def floor_through_rewrite(rig: Rig, sizes: Sizes) -> dict[str, Any]:
    server, port = start_ingest_floor(rig)
    try:
        request = rig.event_request("bench.floor", port, body_bytes=BODY_BYTES)
        await closed_loop(port, request, connections=8, count=300)
        return await open_run(rig, port, request, sizes, [server])
    finally:
        rig.stop(server.name)
        rig.purge_queues()  # its stream


async def _paced(rig: Rig, request: RequestFactory, events: int) -> int:
    """``events`` sent in chunks, each once fewer than ``_BACKLOG`` deliveries are due: the
    workers keep up, as in production, rather than fall minutes behind (then the scheduler
    wakes every delivery waiting past its grace again, and the queue fills with wake-ups
    for work long done). How many were accepted."""
    sent = accepted = 0
    while sent < events:
        if await asyncio.to_thread(rig.redis.zcard, keys.due(0)) >= _BACKLOG:
            await asyncio.sleep(0.05)
            continue
        count = min(_CHUNK, events - sent)
        load = await closed_loop(rig.api_port, request, connections=4, count=count)
        sent, accepted = sent + count, accepted + load.statuses[202]
    return accepted


async def memory(rig: Rig, events: int) -> dict[str, float]:
    """used_memory before, at its highest during, and after ``events`` delivered events,
    the workers running while they are accepted."""
    request, pool = await _stack(rig, "memory")
    before = _memory(rig)
    peak = before
    await rig.resume(pool)

    async def watch() -> None:
        nonlocal peak
        while True:
            peak = max(peak, await asyncio.to_thread(_memory, rig))
            await asyncio.sleep(1.0)

    watcher = asyncio.create_task(watch())
    clock = time.monotonic()
    accepted = await _paced(rig, request, events)
    stats = await rig.receiver.wait_for(accepted * FANOUT, stall=30.0)
    seconds = time.monotonic() - clock
    await _finished(rig)
    watcher.cancel()
    rig.settle()
    after = _memory(rig)
    await rig.pause(pool)
    return {
        "events": accepted,
        "received": stats["received"],
        "before": before,
        "peak": peak,
        "after": after,
        "seconds": seconds,
        "events_per_second": accepted / seconds,
    }


async def hot_window(rig: Rig, events: int) -> dict[str, float]:
    """What a finished event holds in Redis while the default hot window keeps it: the
    scheduler (whose shipper releases) started again with that window."""
    request, pool = await _stack(rig, "hot")
    hot = Settings.model_fields["hot_seconds"].default
    rig.stop("scheduler")
    rig.service("scheduler", "scheduler", WEBHOOK_HOT_SECONDS=str(hot))
    before = _memory(rig)
    clock = time.monotonic()
    await rig.resume(pool)
    accepted = await _paced(rig, request, events)
    await rig.receiver.wait_for(accepted * FANOUT, stall=30.0)
    # Final, recorded and shipped: then held for the window.
    await rig.until_idle()
    await rig.until_shipped()
    rig.settle()
    held = _memory(rig) - before
    if time.monotonic() - clock >= hot:
        raise RuntimeError(f"the hot-window run took longer than the {hot} s window")
    await rig.pause(pool)
    return {"events": accepted, "hot_seconds": hot, "bytes_per_event": held / accepted}


def _logged_attempts(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        counted = conn.execute(sa.select(sa.func.count()).select_from(tables.attempts))
        return int(counted.scalar_one())


async def visible(rig: Rig, seconds: float) -> dict[str, Any]:
    """How long after its receiver got it an attempt is in the SQL log, at STEADY_RATE with
    the workers running: each arrival against the first count of the log's attempts that
    covers it."""
    request, pool = await _stack(rig, "visible")
    engine = sync_engine(Settings(data_dir=rig.directory / "data", log_url=None))
    try:
        start = await asyncio.to_thread(_logged_attempts, engine)
        samples: list[tuple[float, int]] = []
        await rig.resume(pool)
        load = asyncio.create_task(open_loop(rig.api_port, request, STEADY_RATE, seconds))

        async def sample_until(expected: int | None) -> None:
            deadline = time.monotonic() + 60.0
            while time.monotonic() < deadline:
                count = await asyncio.to_thread(_logged_attempts, engine) - start
                samples.append((time.time(), count))
                if expected is not None and count >= expected:
                    return
                await asyncio.sleep(0.05)

        sampler = asyncio.create_task(sample_until(None))
        accepted = (await load).statuses[202]
        sampler.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampler
        await rig.receiver.wait_for(accepted * FANOUT, stall=30.0)
        await sample_until(accepted * FANOUT)
        await _finished(rig)
        await rig.pause(pool)
    finally:
        engine.dispose()
    arrivals = sorted(t for _, _, t in await rig.receiver.arrivals())
    lags, at = [], 0
    for k, arrived in enumerate(arrivals, start=1):
        while at < len(samples) and samples[at][1] < k:
            at += 1
        if at == len(samples):
            break
        lags.append(max(0.0, samples[at][0] - arrived))
    lags.sort()
    return {
        "events": accepted,
        "arrivals": len(arrivals),
        "measured": len(lags),
        "p50_s": lags[len(lags) // 2] if lags else math.nan,
        "p99_s": lags[min(len(lags) - 1, math.ceil(0.99 * len(lags)) - 1)] if lags else math.nan,
        "max_s": lags[-1] if lags else math.nan,
    }


def _visible_rows(part: dict[str, Any]) -> list[Row]:
    run = part["visible"]
    rate = f"{STEADY_RATE:.0f} ev/s"
    return [
        Row("visible", f"attempt in the SQL log after its receiver got it, p99, {rate}",
            one(1000 * run["p99_s"]), "ms", "lower", target=f"≤ {VISIBLE_TARGET_S:g} s",
            met=run["p99_s"] <= VISIBLE_TARGET_S),
        Row("visible", "  p50", one(1000 * run["p50_s"]), "ms", "lower"),
        Row("visible", "  max", one(1000 * run["max_s"]), "ms", "lower"),
        Row("visible", "  attempts measured of those received", one(run["measured"]), "",
            "higher", one(run["arrivals"]), "received"),
    ]  # fmt: skip


def _write_rows(part: dict[str, Any]) -> list[Row]:
    w_old, w_new = part["release"], part["current"]

    def compared(
        figure: str, key: str, unit: str, target: str = "", met: bool | None = None
    ) -> Row:
        return Row("writes", figure, one(w_new[key]), unit, "lower", one(w_old[key]),
                   "release", target, met)  # fmt: skip

    per = f"{FANOUT} endpoints, {BODY_BYTES} B body"
    return [
        compared(f"AOF bytes per ingested event ({per})", "aof_bytes_per_event", "B",
                 f"≤ {AOF_EVENT_TARGET:,} B", w_new["aof_bytes_per_event"] <= AOF_EVENT_TARGET),
        compared("AOF bytes per delivery (lease, record, shipper trim, release)",
                 "aof_bytes_per_delivery", "B", f"≤ {AOF_DELIVERY_TARGET} B",
                 w_new["aof_bytes_per_delivery"] <= AOF_DELIVERY_TARGET),
        compared("Valkey CPU per delivery", "valkey_cpu_ms_per_delivery", CPU,
                 f"≤ {CPU_SHARE_TARGET:.0%} of release's",
                 w_new["valkey_cpu_ms_per_delivery"]
                 <= CPU_SHARE_TARGET * w_old["valkey_cpu_ms_per_delivery"]),
        compared("Valkey CPU per ingested event", "valkey_cpu_ms_per_event", CPU),
        compared(f"AOF bytes per delivered event, workers running, {STEADY_RATE:.0f} ev/s",
                 "steady_aof_bytes_per_event", "B"),
        compared(f"Valkey CPU per delivered event, workers running, {STEADY_RATE:.0f} ev/s",
                 "steady_valkey_cpu_ms_per_event", CPU),
    ]  # fmt: skip


def _memory_rows(part: dict[str, Any]) -> list[Row]:
    mem, hot = part["memory"], part["hot"]
    growth = mem["after"] / mem["before"] - 1
    held = hot["bytes_per_event"] * mem["events_per_second"] * hot["hot_seconds"]
    return [
        Row("memory", f"used_memory before {mem['events']:,} delivered events",
            one(mem["before"] / MIB), "MiB", "lower"),
        Row("memory", "  at its highest while they were delivered", one(mem["peak"] / MIB),
            "MiB", "lower"),
        Row("memory", "  after them, WEBHOOK_HOT_SECONDS=0", one(mem["after"] / MIB), "MiB",
            "lower", one(mem["before"] / MIB), "before",
            f"within {MEMORY_GROWTH_TARGET:.0%} of before", abs(growth) <= MEMORY_GROWTH_TARGET),
        Row("memory", f"  finished event held in the {hot['hot_seconds']:.0f} s hot window",
            one(hot["bytes_per_event"]), "B", "lower"),
        Row("memory", f"  with the default window at {mem['events_per_second']:,.0f} ev/s "
            f"(rate x {hot['hot_seconds']:.0f} s of finished events held)",
            one((mem["before"] + held) / MIB), "MiB", "lower", one(mem["before"] / MIB),
            "before"),
    ]  # fmt: skip


def _ingest_rows(part: dict[str, Any]) -> list[Row]:
    floor = part["floor"]
    new, without = part["current"]["through"], part["current"]["without"]
    old = part["release"]["through"]
    rate = f"{part['rate']:,.0f} ev/s"
    p99 = new["p99_ms"]
    out = [
        Row("ingest", f"p99 at {rate} through an AOF rewrite", one(p99), "ms", "lower",
            one(floor["p99_ms"]), "floor", f"≤ {REWRITE_P99_TARGET:.0f}x floor",
            p99 <= REWRITE_P99_TARGET * floor["p99_ms"]),
        Row("ingest", "  the same, release", one(old["p99_ms"]), "ms", "lower",
            one(floor["p99_ms"]), "floor"),
        Row("ingest", f"  this tree at {rate}, no rewrite", one(without["p99_ms"]), "ms",
            "lower", one(floor["p99_ms"]), "floor"),
    ]  # fmt: skip
    for label, run in (("this tree", new), ("release", old), ("this tree, no rewrite", without)):
        out += [
            Row("ingest", f"  max, {label}", one(run["max_ms"]), "ms", "lower",
                one(floor["max_ms"]), "floor"),
            Row("ingest", f"  errors (429s past 64 requests in flight, no answer), {label}",
                one(run["errors"]), "", "lower", one(floor["errors"]), "floor"),
            Row("ingest", f"  API CPU per answer, {label}", one(run["api_cpu_ms"]), CPU,
                "lower", one(floor["floor-ingest_cpu_ms"]), "floor"),
            Row("ingest", f"  scheduler (shipper) CPU per answer, {label}",
                one(run["scheduler_cpu_ms"]), CPU, "lower"),
            Row("ingest", f"  Valkey CPU per answer, {label}", one(run["valkey_cpu_ms"]), CPU,
                "lower", one(floor["valkey_cpu_ms"]), "floor"),
        ]  # fmt: skip
    out += [
        Row("ingest", "  the rewrite's fork, this tree", one(new["fork_ms"]), "ms", "lower",
            one(old["fork_ms"]), "release"),
        Row("ingest", "  the rewrite's run, this tree", one(new["rewrite_ms"]), "ms", "lower",
            one(old["rewrite_ms"]), "release"),
    ]  # fmt: skip
    return out


_ROWS = {
    "writes": _write_rows,
    "rewrite": _ingest_rows,
    "memory": _memory_rows,
    "visible": _visible_rows,
}


def rows(parts: dict[str, Any]) -> list[Row]:
    return [row for name, make in _ROWS.items() if name in parts for row in make(parts[name])]


def cost_lines(writes_part: dict[str, Any]) -> list[str]:
    """What takes the AOF's bytes, per event of ingest and per delivery, on each side: a
    Markdown table."""
    lines = ["| side | per | command and key | count | bytes |", "|---|---|---|---:|---:|"]
    for side in ("release", "current"):
        figures = writes_part[side]
        for per, key, by in (("event", "ingest_costs", "events"),
                             ("delivery", "delivery_costs", "deliveries"),
                             ("delivered event", "steady_costs", "steady_events")):  # fmt: skip
            lines += [
                f"| {side} | {per} | `{c['kind']}` | {c['count'] / figures[by]:.2f} "
                f"| {c['bytes'] / figures[by]:,.0f} |"
                for c in figures[key]
            ]
    return lines


def _conditions() -> dict[str, Any]:
    return {
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": machine()["commit"],
        "load": os.getloadavg(),
    }


async def _run(sizes: Sizes, parts: Sequence[str], directory: Path) -> dict[str, Any]:
    """The ``parts`` asked for (writes, rewrite, memory), each with when it ran and the
    machine's load average at its start."""
    started = time.monotonic()
    out: dict[str, Any] = {name: _conditions() for name in parts}
    if "writes" in parts or "rewrite" in parts:
        tree = release_tree.export(release_tree.RELEASE, directory / "release-tree")
        _log(started, f"release {release_tree.RELEASE}: starting")
        old = await Rig.start(directory / "release", log_level="INFO", tree=tree)
        try:
            if "writes" in parts:
                _log(started, f"release: writes of {sizes.compare_events:,} events")
                out["writes"]["release"] = await writes(old, sizes.compare_events)
            if "rewrite" in parts:
                _log(started, "release: ingest through a rewrite")
                out["rewrite"]["release"] = await ingest_runs(old, sizes, without=False)
        finally:
            await old.close()
    _log(started, "this tree: starting")
    new = await Rig.start(
        directory / "current", log_level="INFO", settings={"WEBHOOK_HOT_SECONDS": "0"}
    )
    try:
        if "writes" in parts:
            _log(started, f"this tree: writes of {sizes.compare_events:,} events")
            out["writes"]["current"] = await writes(new, sizes.compare_events)
        if "rewrite" in parts:
            _log(started, "floor: ingest through a rewrite")
            out["rewrite"]["floor"] = await floor_through_rewrite(new, sizes)
            _log(started, "this tree: ingest, without a rewrite and through one")
            out["rewrite"]["current"] = await ingest_runs(new, sizes, without=True)
            out["rewrite"]["rate"] = sizes.rate
        # Before the memory part, whose last run leaves the scheduler on the default hot
        # window (the others wait for finished work to leave Redis).
        if "visible" in parts:
            _log(started, f"this tree: attempts visible in the log, {sizes.seconds:g} s")
            out["visible"]["visible"] = await visible(new, sizes.seconds)
        if "memory" in parts:
            _log(started, f"this tree: memory over {sizes.events:,} delivered events")
            out["memory"]["memory"] = await memory(new, sizes.events)
            _log(started, f"this tree: the default hot window, {sizes.hot_events:,} events")
            out["memory"]["hot"] = await hot_window(new, sizes.hot_events)
        out["valkey"] = new.redis.info("server").get("valkey_version", "?")
    finally:
        await new.close()
    for name in parts:
        out[name]["sizes"] = dataclasses.asdict(sizes)
    out["seconds"] = round(time.monotonic() - started, 1)
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000, help="memory run")
    parser.add_argument("--compare-events", type=int, default=4000, help="writes, each stack")
    parser.add_argument("--hot-events", type=int, default=6000, help="hot-window run")
    parser.add_argument("--rate", type=float, default=1000.0, help="ev/s through the rewrite")
    parser.add_argument("--seconds", type=float, default=20.0, help="of that run")
    parser.add_argument(
        "--only",
        default=",".join(PARTS),
        help=f"comma list of {', '.join(PARTS)}; the other parts of {RESULTS}/log.json are kept",
    )
    parser.add_argument("--keep", action="store_true", help="keep the processes' logs and data")
    args = parser.parse_args(argv)
    parts = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = set(parts) - set(PARTS)
    if unknown:
        parser.error(f"unknown parts: {', '.join(sorted(unknown))}")
    sizes = Sizes(args.events, args.compare_events, args.hot_events, args.rate, args.seconds)
    saved = RESULTS / "log.json"
    kept = saved.exists() and set(parts) != set(PARTS)
    result: dict[str, Any] = {
        **(orjson.loads(saved.read_bytes()) if kept else {}),
        "release_commit": release_tree.RELEASE,
        "machine": machine(),
    }
    with scratch("whs-bench-log-", args.keep) as directory:
        result.update(uvloop.run(_run(sizes, parts, directory)))
    save_json(saved.stem, result)
    table = rows(result)
    costs = cost_lines(result["writes"]) if "writes" in result else []
    (RESULTS / "log.md").write_text(markdown_table(table) + "\n\n" + "\n".join(costs) + "\n")
    print("\n".join(costs) + "\n")
    print(text_table(table))
    print(f"\n{result['seconds']} s; results in {saved}")


if __name__ == "__main__":
    main()
