"""The log shipper's write rate into SQL, SQLite against PostgreSQL in one run (issue 20).

    python -m bench.bench_log_ship [--events 3000] [--rate 80] [--seconds 30] [--keep]

About 3 minutes as given. Each backend in turn gets a whole service of its own (bench/rig.py:
Valkey with AOF, the API, 2 worker processes, the scheduler with its shipper, the bench's
verifying receiver), its log in SQLite in the rig's directory or in a database of a
PostgreSQL this bench starts (initdb by tests/support/postgres.py), run with PostgreSQL's
defaults for durability, ``fsync`` and ``full_page_writes`` on, which the tests turn off.
Every event has a 100-byte body and fans out to 3 endpoints; ``WEBHOOK_HOT_SECONDS=0``, so
the release each shipped batch leads to is done inside the time measured, not a minute
later.

- **burst**, the shipper alone: the scheduler stopped (SIGSTOP: its shipper stands still),
  ``--events`` events are accepted and delivered, so that the outbox holds their records
  (one an event, one a delivery's attempt). Then SIGCONT, and the outbox polled every 10 ms
  until it is empty. The rate is taken from the first drop of the outbox to the last: its
  bucket leases expired while it was stopped, and the first batch waits for the
  scheduler's pass that takes them again (reported apart). Rows/s of each table is that
  rate times the table's rows per record. The scheduler's CPU (/proc, user + system) from
  SIGCONT to the empty outbox, per 1 000 records.
- **load**, production's mix: the workers and the scheduler running, an open loop at
  ``--rate`` events/s for ``--seconds`` (80 x 3 deliveries/s: about what 2 workers deliver
  on this machine beside everything else; the rate the receiver got is reported); the
  outbox's length sampled every 250 ms. At the end of the loop: the records waiting
  (backlog), the deliveries the receiver got that the log does not hold yet (lag), and how
  long until it holds them. The shipper keeps up when the backlog at the end is under one
  batch (``WEBHOOK_LOG_BATCH_SIZE``).

SQLite runs inside the scheduler's process, so its CPU is in the scheduler's figure;
PostgreSQL's server works apart, and what a batch waits for it is the difference between the
burst's time per record and the scheduler's CPU per record.

Both phases measure what the log grows by, per delivery: on PostgreSQL the sum of
``pg_total_relation_size`` (heap, indexes, TOAST) over every table of the database, each
partitioned table's partitions added up (``pg_partition_tree``), and the WAL written
(``pg_wal_lsn_diff`` of ``pg_current_wal_lsn()`` before and after; a CHECKPOINT starts each
phase, so the full-page images that follow one are in it, and ``pg_waldump --stats`` tells
their share); on SQLite the file's growth, checkpointed (``wal_checkpoint(TRUNCATE)``)
before each reading, and each table's pages with its indexes (``dbstat``). The load's
records are counted by the outboxes' own counters (``XINFO STREAM`` entries-added), the
burst's by the outbox's length. A delivery's row is written by its event's record and
written again by its attempt's (status, attempts, last code and class: columns of its
indexes, so PostgreSQL's update is no HOT one and every index gets a new entry); the dead
versions count as written, less what autovacuum made reusable meanwhile (it may visit a
partition between the phases). Last, with the service stopped, the log compacted
(``VACUUM``; ``VACUUM FULL`` on PostgreSQL) over every delivery it holds, less the empty
log's own pages: the floor that autovacuum's reuse of the dead versions' room tends to.

Prints each figure for PostgreSQL with SQLite's beside it and the ratio (above 1:
PostgreSQL better), then the sizing the load's figures give at 100 and 1 000
deliveries/s; writes ``bench/results/log_ship.json`` and ``log_ship.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import sqlite3
import subprocess
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import redis
import sqlalchemy as sa
import uvloop
from pydantic import SecretStr

from bench.footprint import BODY_BYTES
from bench.http_load import closed_loop, open_loop
from bench.report import CPU, Row, markdown_table, one, text_table
from bench.rig import Rig
from bench.run import RESULTS, machine, save_json, scratch
from tests.support.postgres import Postgres, start_postgres
from webhook_service.config import Settings
from webhook_service.history import tables
from webhook_service.history.database import SQLITE_FILE, sync_engine, upgrade
from webhook_service.history.partitions import PARTITIONED
from webhook_service.history.shipper import outbox_length
from webhook_service.store import keys

FANOUT = 3
WORKERS = 2
BACKENDS = ("sqlite", "postgresql")
_EVENT_TYPE = "bench.ship"
_LOAD_CONNECTIONS = 32
# Deliveries/s the sizing is printed for.
SIZING_RATES = (100, 1000)
SECONDS_A_DAY = 86_400
GB = 1e9


def _say(started: float, text: str) -> None:
    print(f"[{time.monotonic() - started:6.1f}s] {text}", flush=True)


@dataclasses.dataclass(frozen=True)
class Reading:
    """The log and the shipper at one moment."""

    rows: dict[str, int]  # by table
    bytes: dict[str, int]  # by table (indexes and TOAST in), and "all"
    wal: str  # PostgreSQL's WAL position, pg_current_wal_lsn(); "" on SQLite
    cpu: float  # the scheduler's CPU seconds
    records: int  # outbox entries ever added, every bucket


@dataclasses.dataclass
class Log:
    """The SQL log of one rig, read from the bench's own connection."""

    engine: sa.Engine
    sqlite_file: Path | None
    # PostgreSQL's pg_waldump and the server's pg_wal directory.
    waldump: tuple[Path, Path] | None = None

    def rows(self) -> dict[str, int]:
        with self.engine.connect() as conn:
            return {
                t: int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())
                for t, table in ((t, tables.metadata.tables[t]) for t in PARTITIONED)
            }

    def sizes(self) -> dict[str, int]:
        """Bytes of each log table with its indexes (``<table>``), of its indexes alone
        (``<table>.indexes``), and of the whole database's tables (``all``)."""
        found: dict[str, int] = {}
        with self.engine.connect() as conn:
            if self.sqlite_file is not None:
                # The WAL's frames into the file, and the WAL cut to nothing: the file's size
                # is then the log's, not the WAL's high-water mark.
                conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
                pages = conn.exec_driver_sql(
                    "SELECT m.tbl_name, m.type, sum(d.pgsize) FROM dbstat d "
                    "JOIN sqlite_master m ON m.name = d.name GROUP BY m.tbl_name, m.type"
                )
                for table, kind, size in pages:
                    found[table] = found.get(table, 0) + int(size)
                    if kind == "index":
                        found[f"{table}.indexes"] = int(size)
                total = self.sqlite_file.stat().st_size
            else:
                for t in PARTITIONED:
                    both, indexes = conn.execute(
                        sa.text(
                            "SELECT coalesce(sum(pg_total_relation_size(relid)), 0), "
                            "coalesce(sum(pg_indexes_size(relid)), 0) "
                            "FROM pg_partition_tree(CAST(:t AS regclass))"
                        ),
                        {"t": t},
                    ).one()
                    found[t], found[f"{t}.indexes"] = int(both), int(indexes)
                # Leaf tables only: a partitioned parent holds nothing of its own.
                total = int(
                    conn.exec_driver_sql(
                        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                        "JOIN pg_namespace n ON n.oid = c.relnamespace "
                        "WHERE n.nspname = 'public' AND c.relkind = 'r'"
                    ).scalar_one()
                )
        named = [name for t in PARTITIONED for name in (t, f"{t}.indexes")]
        return {**{name: found.get(name, 0) for name in named}, "all": total}

    def compacted(self) -> dict[str, int]:
        """The sizes once the dead row versions are gone (VACUUM, FULL on PostgreSQL: the
        tables and indexes written anew), the service stopped."""
        full = "VACUUM" if self.sqlite_file is not None else "VACUUM FULL"
        with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql(full)
        return self.sizes()

    def wal(self) -> str:
        if self.sqlite_file is not None:
            return ""
        with self.engine.connect() as conn:
            return str(conn.exec_driver_sql("SELECT pg_current_wal_lsn()").scalar_one())

    def wal_between(self, start: str, end: str) -> tuple[int, int]:
        """PostgreSQL: the WAL bytes between two positions, and how many of them are
        full-page images (``pg_waldump --stats``' total line: records, their bytes, the
        share, the images' bytes, …); (0, 0) on SQLite."""
        if self.waldump is None:
            return 0, 0
        with self.engine.connect() as conn:
            written = conn.execute(
                sa.text("SELECT pg_wal_lsn_diff(CAST(:end AS pg_lsn), CAST(:start AS pg_lsn))"),
                {"start": start, "end": end},
            ).scalar_one()
        binary, directory = self.waldump
        stats = subprocess.run(
            [str(binary), "--stats", "-p", str(directory), "-s", start, "-e", end],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        total = next(line for line in stats.splitlines() if line.startswith("Total"))
        return int(written), int(total.split()[4])

    def checkpoint(self) -> None:
        """PostgreSQL: a CHECKPOINT, so that a phase's WAL holds the full-page images every
        page touched after one costs (SQLite's are taken with each size reading)."""
        if self.sqlite_file is None:
            with self.engine.connect() as conn:
                conn.exec_driver_sql("CHECKPOINT")


def _records_added(client: redis.Redis) -> int:
    """Outbox entries ever added, every bucket: the stream's own counter, which a trim
    leaves alone. A bucket whose outbox was never written has no stream yet."""
    with client.pipeline(transaction=False) as pipe:
        for bucket in keys.all_buckets():
            pipe.xinfo_stream(keys.outbox(bucket))
        answers = pipe.execute(raise_on_error=False)
    return sum(int(a["entries-added"]) for a in answers if isinstance(a, dict))


def _read(rig: Rig, log: Log) -> Reading:
    return Reading(
        rows=log.rows(),
        bytes=log.sizes(),
        wal=log.wal(),
        cpu=rig.children["scheduler"].cpu_seconds(),
        records=_records_added(rig.redis),
    )


def _grown(log: Log, before: Reading, after: Reading, deliveries: int) -> dict[str, Any]:
    """What the log grew by between two readings, per delivery."""
    written, images = log.wal_between(before.wal, after.wal)
    return {
        "rows": {t: after.rows[t] - before.rows[t] for t in PARTITIONED},
        "bytes_per_delivery": {
            t: (after.bytes[t] - before.bytes[t]) / deliveries for t in before.bytes
        },
        "wal_bytes_per_delivery": written / deliveries,
        "wal_full_page_bytes_per_delivery": images / deliveries,
        "records": after.records - before.records,
    }


async def _prepared(rig: Rig) -> None:
    """The run's endpoints, the workers running, 100 events delivered and shipped (scripts
    loaded, connections open, the log's first pages made)."""
    await rig.endpoints([f"ship-{n}" for n in range(FANOUT)], _EVENT_TYPE)
    await rig.workers("ours", WORKERS)
    request = rig.event_request(_EVENT_TYPE, body_bytes=BODY_BYTES)
    await closed_loop(rig.api_port, request, connections=8, count=100)
    await rig.receiver.wait_for(100 * FANOUT, stall=30.0)
    await rig.until_idle()
    await rig.until_released()
    await rig.receiver.reset()


async def _recorded(rig: Rig, records: int, within: float = 60.0) -> None:
    """Until the outboxes hold ``records`` entries (the shipper stopped): a receiver counts
    an arrival before its worker has written the attempt's record."""
    start = time.monotonic()
    while await asyncio.to_thread(outbox_length, rig.redis) < records:
        if time.monotonic() - start > within:
            raise RuntimeError(f"the outbox did not reach {records} records within {within}s")
        await asyncio.sleep(0.05)


async def burst(rig: Rig, log: Log, events: int) -> dict[str, Any]:
    """The shipper alone on a full outbox: see the module's text."""
    request = rig.event_request(_EVENT_TYPE, body_bytes=BODY_BYTES)
    rig.settle()
    with rig.scheduler_paused():
        load = await closed_loop(rig.api_port, request, connections=_LOAD_CONNECTIONS, count=events)
        accepted = load.statuses[202]
        deliveries = accepted * FANOUT
        stats = await rig.receiver.wait_for(deliveries, stall=30.0)
        if stats["received"] < deliveries:
            raise RuntimeError(f"{stats['received']} of {deliveries} deliveries arrived")
        await _recorded(rig, accepted + deliveries)
        waiting = await asyncio.to_thread(outbox_length, rig.redis)
        await asyncio.to_thread(log.checkpoint)
        before = await asyncio.to_thread(_read, rig, log)
        resumed = time.monotonic()
    first_drop: tuple[float, int] | None = None
    while (left := outbox_length(rig.redis)) > 0:
        if first_drop is None and left < waiting:
            first_drop = (time.monotonic(), left)
        if time.monotonic() - resumed > 120.0:
            raise RuntimeError(f"the shipper left {left} records after 120 s")
        await asyncio.sleep(0.01)
    emptied = time.monotonic()
    cpu = rig.children["scheduler"].cpu_seconds() - before.cpu
    after = await asyncio.to_thread(_read, rig, log)
    await rig.receiver.reset()
    await rig.until_released()
    # None: every record went in one batch, none is left to time past the first.
    dropped_at, measured = first_drop if first_drop is not None else (resumed, waiting)
    rate = measured / (emptied - dropped_at)
    # The records were all added before the first reading: the outbox's length counts them.
    grown = {**_grown(log, before, after, deliveries), "records": waiting}
    return {
        **grown,
        "events": accepted,
        "deliveries": deliveries,
        "first_batch_ms": 1000 * (dropped_at - resumed),
        "seconds": emptied - resumed,
        "records_per_s": rate,
        "rows_per_s": {t: rate * n / waiting for t, n in grown["rows"].items()},
        "scheduler_cpu_ms_per_1000": 1000 * cpu / waiting * 1000,
    }


async def steady(rig: Rig, log: Log, rate: float, seconds: float) -> dict[str, Any]:
    """Production's mix at ``rate`` events/s: see the module's text."""
    request = rig.event_request(_EVENT_TYPE, body_bytes=BODY_BYTES)
    rig.settle()
    await asyncio.to_thread(log.checkpoint)
    before = await asyncio.to_thread(_read, rig, log)
    backlog: list[int] = []

    async def sample() -> None:
        while True:
            backlog.append(await asyncio.to_thread(outbox_length, rig.redis))
            await asyncio.sleep(0.25)

    sampler = asyncio.create_task(sample())
    load = await open_loop(rig.api_port, request, rate, seconds)
    ended = time.monotonic()
    at_end = outbox_length(rig.redis)
    received = int((await rig.receiver.stats())["received"])
    sampler.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await sampler

    def logged() -> int:
        return log.rows()["attempts"] - before.rows["attempts"]

    lag = received - await asyncio.to_thread(logged)
    # The log's lag behind the receiver at the end: until it holds every attempt the
    # receiver had got by then (the workers may still be delivering the rest).
    while await asyncio.to_thread(logged) < received:
        if time.monotonic() - ended > 60.0:
            raise RuntimeError("the log did not catch up with the receiver within 60 s")
        await asyncio.sleep(0.02)
    caught_up = time.monotonic() - ended
    accepted = load.statuses[202]
    deliveries = accepted * FANOUT
    stats = await rig.receiver.wait_for(deliveries, stall=30.0)
    await rig.until_idle()
    await rig.until_shipped()
    after = await asyncio.to_thread(_read, rig, log)
    await rig.until_released()
    await rig.receiver.reset()
    grown = _grown(log, before, after, deliveries)
    return {
        **grown,
        "rate": rate,
        "seconds": seconds,
        "events": accepted,
        "errors": load.errors,
        "deliveries": deliveries,
        "received": stats["received"],
        "received_per_s": received / load.elapsed_s,
        "backlog_max": max(backlog, default=0),
        "backlog_at_end": at_end,
        "lag_at_end": lag,
        "caught_up_ms": 1000 * caught_up,
        "kept_up": at_end < Settings.model_fields["log_batch_size"].default,
        "scheduler_cpu_ms_per_1000": 1000 * (after.cpu - before.cpu) / grown["records"] * 1000,
    }


class _Durable(Postgres):
    """The tests' server started with PostgreSQL's own defaults for durability: ``fsync``
    and ``full_page_writes`` on (the tests turn them off on the command line, which no
    ALTER SYSTEM overrides)."""

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 "
            "-c max_connections=200"
        )
        self._ctl("-o", options, "-l", str(self.directory / "server.log"), "-w", "start")


@contextlib.contextmanager
def _postgres() -> Iterator[Postgres]:
    """The bench's own server (initdb by tests/support/postgres.py), restarted durable."""
    made = start_postgres()
    made.stop()
    server = _Durable(made.bin_dir, made.directory, made.port)
    try:
        server.start()
        yield server
    finally:
        server.destroy()


async def _backend(
    backend: str, args: argparse.Namespace, directory: Path, started: float
) -> dict[str, Any]:
    with contextlib.ExitStack() as stack:
        data = directory / backend / "data"
        settings: dict[str, str] = {"WEBHOOK_HOT_SECONDS": "0"}
        if backend == "postgresql":
            server = stack.enter_context(_postgres())
            url = server.create_database()
            settings["WEBHOOK_LOG_URL"] = url
            config = Settings(data_dir=data, log_url=SecretStr(url))
            version = server.bin_dir.parent.name
        else:
            config = Settings(data_dir=data, log_url=None)
            version = sqlite3.sqlite_version
        engine = sync_engine(config)
        stack.callback(engine.dispose)
        if backend == "postgresql":
            # Before the service starts; the rig migrates the SQLite log itself.
            await asyncio.to_thread(upgrade, engine)
            log = Log(engine, None, (server.bin_dir / "pg_waldump", server.directory / "pg_wal"))
        else:
            log = Log(engine, data / SQLITE_FILE)
        _say(started, f"{backend}: starting the service")
        rig = await Rig.start(directory / backend, log_level="WARNING", settings=settings)
        try:
            # The empty log's own pages (every partition's indexes have one even when empty):
            # the compacted figure is of what the deliveries added.
            empty = await asyncio.to_thread(log.sizes)
            await _prepared(rig)
            _say(started, f"{backend}: burst of {args.events:,} events, the shipper stopped")
            out = {"version": version, "burst": await burst(rig, log, args.events)}
            _say(started, f"{backend}: {args.rate:g} ev/s for {args.seconds:g} s")
            out["load"] = await steady(rig, log, args.rate, args.seconds)
        finally:
            await rig.close()
        deliveries = (await asyncio.to_thread(log.rows))["deliveries"]
        compacted = await asyncio.to_thread(log.compacted)
        # Over every delivery the log holds: the warm-up's, the burst's and the load's.
        out["compacted"] = {
            "deliveries": deliveries,
            "empty": empty,
            "bytes_per_delivery": {
                name: (n - empty[name]) / deliveries for name, n in compacted.items()
            },
        }
    return out


def _rows(result: dict[str, Any]) -> list[Row]:
    pg, lite = result["postgresql"], result["sqlite"]

    def both(
        section: str,
        figure: str,
        path: Sequence[str],
        unit: str,
        better: Literal["higher", "lower"],
    ) -> Row:
        def at(side: dict[str, Any]) -> float:
            value: Any = side[section]
            for key in path:
                value = value[key]
            return float(value)

        return Row(section, figure, one(at(pg)), unit, better, one(at(lite)), "SQLite")

    out = [
        both("burst", "records/s the shipper commits (after its first batch)",
             ["records_per_s"], "/s", "higher"),
        *(both("burst", f"  {t} rows/s", ["rows_per_s", t], "/s", "higher")
          for t in PARTITIONED),
        both("burst", "  first batch after SIGCONT (the leases taken again)", ["first_batch_ms"],
             "ms", "lower"),
        both("burst", "scheduler CPU per 1 000 records", ["scheduler_cpu_ms_per_1000"], CPU,
             "lower"),
    ]  # fmt: skip
    for section, label in (("burst", "burst"), ("load", "load"), ("compacted", "compacted")):
        out += [
            both(section, f"log bytes per delivery, {label} (tables, indexes)",
                 ["bytes_per_delivery", "all"], "B", "lower"),
        ]  # fmt: skip
        for t in PARTITIONED:
            out += [
                both(section, f"  {t}", ["bytes_per_delivery", t], "B", "lower"),
                both(section, "    of which indexes", ["bytes_per_delivery", f"{t}.indexes"],
                     "B", "lower"),
            ]  # fmt: skip
        if section != "compacted":
            out += [
                Row(section, "WAL bytes per delivery (PostgreSQL)",
                    one(pg[section]["wal_bytes_per_delivery"]), "B", "lower"),
                Row(section, "  of which full-page images (a CHECKPOINT began the phase)",
                    one(pg[section]["wal_full_page_bytes_per_delivery"]), "B", "lower"),
            ]  # fmt: skip
    rate = f"{pg['load']['rate']:g} ev/s x{FANOUT}"
    out += [
        both("load", f"scheduler CPU per 1 000 records, {rate}", ["scheduler_cpu_ms_per_1000"],
             CPU, "lower"),
        both("load", "outbox backlog at the end of the load, records", ["backlog_at_end"], "",
             "lower"),
        both("load", "  at its highest", ["backlog_max"], "", "lower"),
        both("load", "deliveries received, not yet in the log, at the end", ["lag_at_end"], "",
             "lower"),
        both("load", "  the log holds them, after the end of the load", ["caught_up_ms"],
             "ms", "lower"),
        both("load", "deliveries/s received during the load", ["received_per_s"], "/s",
             "higher"),
    ]  # fmt: skip
    return out


def sizing(result: dict[str, Any]) -> list[str]:
    """GB a day at each of SIZING_RATES deliveries/s: from the load's bytes per delivery (as
    written, dead row versions in) and from the compacted ones (what vacuum's reuse of their
    room tends to), and whether each backend's shipper kept up with the load."""
    pg, lite = result["postgresql"], result["sqlite"]
    lines = []

    def day(side: dict[str, Any], part: str, name: str, rate: int) -> str:
        return f"{side[part]['bytes_per_delivery'][name] * rate * SECONDS_A_DAY / GB:.1f}"

    for rate in SIZING_RATES:
        daily = rate * SECONDS_A_DAY / GB
        tables = ", ".join(
            f"{t} {day(pg, 'load', t, rate)} ({day(pg, 'compacted', t, rate)})" for t in PARTITIONED
        )
        lines.append(
            f"at {rate:,} deliveries/s ({rate / FANOUT:,.0f} events/s, fan-out {FANOUT}, one "
            f"attempt each): PostgreSQL {day(pg, 'load', 'all', rate)} GB a day of tables and "
            f"indexes as written ({day(pg, 'compacted', 'all', rate)} compacted), a day's "
            f"partitions {tables}; {pg['load']['wal_bytes_per_delivery'] * daily:.1f} GB of "
            f"WAL a day ({pg['load']['wal_full_page_bytes_per_delivery'] * daily:.1f} of it "
            f"full-page images, at a checkpoint each {pg['load']['seconds']:g} s); "
            f"SQLite {day(lite, 'load', 'all', rate)} GB a day "
            f"({day(lite, 'compacted', 'all', rate)} compacted)"
        )
    for backend in BACKENDS:
        load = result[backend]["load"]
        lines.append(
            f"{backend} at {load['rate']:g} ev/s x{FANOUT} for {load['seconds']:g} s: the "
            f"shipper {'kept up' if load['kept_up'] else 'fell BEHIND'} (backlog "
            f"{load['backlog_at_end']} records at the end, at most {load['backlog_max']}; "
            f"{load['lag_at_end']} deliveries received and not yet in the log, which held "
            f"them {load['caught_up_ms']:.0f} ms later)"
        )
    return lines


async def _run(args: argparse.Namespace, directory: Path) -> dict[str, Any]:
    started = time.monotonic()
    out: dict[str, Any] = {
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "load_before": os.getloadavg(),
        "sizes": {"events": args.events, "rate": args.rate, "seconds": args.seconds},
    }
    for backend in BACKENDS:
        out[backend] = await _backend(backend, args, directory, started)
    out["seconds"] = round(time.monotonic() - started, 1)
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=3000, help="burst, each backend")
    parser.add_argument("--rate", type=float, default=80.0, help="events/s of the load")
    parser.add_argument("--seconds", type=float, default=30.0, help="of the load")
    parser.add_argument("--keep", action="store_true", help="keep the processes' logs and data")
    args = parser.parse_args(argv)
    with scratch("whs-bench-ship-", args.keep) as directory:
        result = uvloop.run(_run(args, directory))
    save_json("log_ship", result)
    table = _rows(result)
    sized = sizing(result)
    (RESULTS / "log_ship.md").write_text(
        markdown_table(table) + "\n\n" + "\n".join(f"- {s}" for s in sized) + "\n"
    )
    print(text_table(table))
    print("\n" + "\n".join(sized))
    print(f"\n{result['seconds']} s; results in {RESULTS / 'log_ship.json'}")


if __name__ == "__main__":
    main()
