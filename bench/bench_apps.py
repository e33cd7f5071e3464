"""Applications at scale (issue 16): one application's ingest with 10 000 of them in the store,
against the same with one; and what an application and an endpoint hold in Redis.

    python -m bench.bench_apps [--apps 10000] [--endpoints 3] [--rate 300] [--seconds 6]
                               [--rounds 10] [--keep]

About 3 minutes as given (20 s of it filling B). One Valkey (the flags of ``webhook-service
up``: AOF ``everysec``), the API and the scheduler (with its log shipper) as real processes
(bench/rig.py); no worker: only ingest is measured, and deliveries stay pending (the
endpoints' URLs are the bench receiver's, which answers 200, but nothing sends to them).

The two setups are two databases of that one Valkey, and ``SWAPDB 0 1`` puts the wanted one
where the service's processes work (database 0), in one step, under the same processes,
connections and scripts:

- **A**: the application measured (uid ``bench-target``, made through the API with its
  endpoints, every one subscribed to the type sent), and nothing else;
- **B**: a copy of A (``COPY``: the same ids), then ``--apps`` - 1 more applications with
  ``--endpoints`` endpoints each, every one of the same type, made by the store's own code
  (``ApplicationStore.create``, ``EndpointStore.save``: app_save.lua and endpoint_save.lua,
  a real sealed secret each), 64 at a time.

B is filled while ``used_memory`` is read after each part (after a settle: no AOF rewrite,
no lazy free pending): the applications alone, then one endpoint for each of them, round
after round; and ``MEMORY USAGE`` (every element weighed) of their keys and of the shared
ones (apps, apps:uid, endpoints, endpoints:seqs). Then rounds of A, B, A, B...: each an open
loop at ``--rate`` for ``--seconds`` into the measured application (``POST
/v1/applications/bench-target/events``, 100-byte bodies, the admin key, so its uid is looked
up as a producer's would be), from a store with no event left of the last run, the AOF just
rewritten and the disk written back: p50, p99, errors, and the CPU the API and Valkey spent
per 202. Prints the B/A ratios against the issue's 1.5x; writes ``bench/results/apps.json``
and ``apps.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import orjson
import redis
import uvloop
from redis.asyncio import Redis as AsyncRedis

from bench.apps_report import (
    Comparison,
    MemoryReadings,
    compare,
    comparison_lines,
    memory_figures,
    split_entries,
)
from bench.footprint import BODY_BYTES
from bench.http_load import RequestFactory, build_request, closed_loop, open_loop
from bench.payload import event_data
from bench.rig import Rig
from bench.run import RESULTS, machine, save_json, scratch
from bench.stats import percentile
from signer import generate_secret
from webhook_service.config import Settings
from webhook_service.crypto import SecretBox
from webhook_service.ids import mark_of, new_id
from webhook_service.store import keys
from webhook_service.store.applications import (
    ApplicationOutcome,
    ApplicationRecord,
    ApplicationStore,
    new_app_id,
)
from webhook_service.store.endpoints import EndpointRecord, EndpointStore, SealedSecret
from webhook_service.store.scripts import Scripts
from webhook_service.timeutil import now_ms

TARGET_UID = "bench-target"
EVENT_TYPE = "bench.apps"
RATIO_TARGET = 1.5
# Store calls in flight while B is filled.
_CONCURRENCY = 64
# Applications and endpoints whose own keys are weighed one by one.
_SAMPLED = 50
# The database B waits in while A is measured, and A while B is.
_SPARE_DB = 1
_STALL_MS = 20
_SLOW_KEPT = 10
T = TypeVar("T")


@dataclass(frozen=True)
class Sizes:
    apps: int  # in B, the measured one among them
    endpoints: int  # per application
    rate: float  # events/s of each run
    seconds: float
    rounds: int


def _log(started: float, text: str) -> None:
    print(f"[{time.monotonic() - started:6.1f}s] {text}", flush=True)


def _used_memory(rig: Rig) -> int:
    """``used_memory`` less the clients' buffers (``mem_clients_normal``): connections
    opening and closing (the bench's own among them) are no application's cost."""
    memory = rig.redis.info("memory")
    return int(memory["used_memory"]) - int(memory["mem_clients_normal"])


def _usage(client: redis.Redis, key: str) -> int:
    # SAMPLES 0: every element weighed, not an estimate from five.
    return int(client.memory_usage(key, samples=0) or 0)


def _mean_usage(client: redis.Redis, names: Iterable[str]) -> float:
    return statistics.mean(_usage(client, name) for name in names)


def _entry_usage(client: redis.Redis, name: str, count: str) -> float:
    """One entry's share of a structure kept once per bucket (keys.in_bucket ``name``): the
    buckets' sizes over their entries (``count``: HLEN or ZCARD, what counts them)."""
    found = [keys.in_bucket(b, name) for b in keys.all_buckets()]
    counter = client.hlen if count == "HLEN" else client.zcard
    entries = [int(counter(key)) for key in found]
    return sum(_usage(client, k) for k, n in zip(found, entries, strict=True) if n) / sum(entries)


def _unlink_matching(client: redis.Redis, pattern: str) -> None:
    batch: list[str] = []
    for name in client.scan_iter(pattern, count=2000):
        batch.append(name)
        if len(batch) >= 2000:
            client.unlink(*batch)
            batch.clear()
    if batch:
        client.unlink(*batch)


async def _each(items: Iterable[T], work: Callable[[T], Awaitable[None]]) -> None:
    """``work`` on every item, ``_CONCURRENCY`` at a time."""
    pending = iter(items)

    async def worker() -> None:
        for item in pending:
            await work(item)

    await asyncio.gather(*(worker() for _ in range(_CONCURRENCY)))


def _ingest_request(rig: Rig) -> RequestFactory:
    body = orjson.dumps({"type": EVENT_TYPE, "data": event_data(EVENT_TYPE, BODY_BYTES)})
    headers = {"Authorization": f"Bearer {rig.admin_key}", "Content-Type": "application/json"}
    path = f"/v1/applications/{TARGET_UID}/events"
    request = build_request("POST", path, rig.api_port, body, headers)
    return lambda _i: request


async def _target(rig: Rig, endpoints: int) -> str:
    """The measured application and its endpoints, through the API: its id."""
    made = await rig.api("POST", "/v1/applications", {"name": "bench target", "uid": TARGET_UID})
    for n in range(endpoints):
        body = {"url": rig.receiver.url(f"target-{n}"), "event_types": [EVENT_TYPE]}
        await rig.api("POST", f"/v1/applications/{TARGET_UID}/endpoints", body)
    return str(made["id"])


def _clear_traffic(rig: Rig) -> None:
    """What ingest left in database 0 (events, pending deliveries, their due entries and
    wake-ups, the endpoints' backlog counts): the next run starts from the store as it was
    filled. The outbox must have been shipped."""
    rig.purge_queues()
    for pattern in (
        # Every bucket's.
        keys.PREFIX + "{*}:" + keys.LUA_KEYS["event"] + "*",
        keys.PREFIX + "{*}:" + keys.LUA_KEYS["delivery"] + "*",
        keys.PREFIX + "{*}:" + keys.LUA_KEYS["backlog"] + "*",
        keys.PREFIX + "{*}:" + keys.LUA_KEYS["wakeup"] + "*",
    ):
        _unlink_matching(rig.redis, pattern)


def _copy_to_spare(rig: Rig) -> int:
    """Every key of database 0 copied to the spare one, expiry and all: how many."""
    copied = 0
    for name in rig.redis.scan_iter(count=2000):
        copied += int(rig.redis.copy(name, name, destination_db=str(_SPARE_DB), replace=True))
    return copied


@dataclass
class Filled:
    readings: MemoryReadings
    keys: dict[str, float]  # MEMORY USAGE figures
    seconds: float


async def _fill(rig: Rig, sizes: Sizes, started: float) -> Filled:
    """B in the spare database: ``sizes.apps`` - 1 applications, then their endpoints one
    round at a time, ``used_memory`` read after each part and a sample of keys weighed."""
    # The URL names database 0, and a URL's database wins over from_url's own argument.
    url = rig.valkey.url.rsplit("/", 1)[0] + f"/{_SPARE_DB}"
    client = AsyncRedis.from_url(url, decode_responses=True)
    sync = redis.Redis.from_url(url, decode_responses=True)
    scripts = Scripts(client)
    applications, endpoints = ApplicationStore(client, scripts), EndpointStore(client, scripts)
    box = SecretBox(rig.env["WEBHOOK_MASTER_KEY"])
    count = sizes.apps - 1
    # The quota the API applies, checked by endpoint_save.lua on every creation.
    most = int(Settings.model_fields["max_endpoints_per_app"].default)
    clock = time.monotonic()
    try:
        # Every connection the fill will use opened first, so none opens between readings.
        sync.ping()
        await asyncio.gather(*(client.ping() for _ in range(_CONCURRENCY)))
        rig.settle()
        before = _used_memory(rig)
        app_ids: list[str] = []

        async def make_app(n: int) -> None:
            at = now_ms()
            uid = f"customer-{n:05d}"
            app_id = new_app_id(at, uid)  # of its uid's bucket, as the API makes it
            record = ApplicationRecord(app_id, f"Customer {n}", uid, {}, None, at, at)
            outcome = await applications.create(record)
            if outcome is not ApplicationOutcome.CREATED:
                raise RuntimeError(f"application {n}: {outcome}")
            app_ids.append(app_id)

        await _each(range(count), make_app)
        rig.settle()
        after_apps = _used_memory(rig)
        _log(started, f"B: {count:,} applications in {time.monotonic() - clock:.1f} s")
        sampled = app_ids[:_SAMPLED]
        endpoint_ids: list[str] = []

        async def make_endpoint(app_id: str) -> None:
            at = now_ms()
            endpoint_id = new_id("ep", at, mark=mark_of(app_id))  # its application's bucket
            record = EndpointRecord(
                id=endpoint_id,
                url=rig.receiver.url(endpoint_id),
                description="",
                event_types=[EVENT_TYPE],
                disabled=False,
                created_ms=at,
                updated_ms=at,
                secrets=[SealedSecret(box.seal(generate_secret(), endpoint_id))],
                application=app_id,
            )
            await endpoints.save(record, creating=True, max_endpoints=most)
            endpoint_ids.append(endpoint_id)

        after_rounds: list[int] = []
        first: dict[str, float] = {}
        for round_ in range(sizes.endpoints):
            await _each(app_ids, make_endpoint)
            rig.settle()
            after_rounds.append(_used_memory(rig))
            if round_ == 0:
                first = _app_key_sizes(sync, sampled)
        _log(
            started, f"B: {len(endpoint_ids):,} endpoints, {time.monotonic() - clock:.1f} s in all"
        )
        weighed = _key_sizes(sync, sampled, endpoint_ids[:_SAMPLED], first, sizes.endpoints)
    finally:
        await client.aclose()
        sync.close()
    readings = MemoryReadings(count, before, after_apps, after_rounds)
    return Filled(readings, weighed, time.monotonic() - clock)


def _app_key_sizes(client: redis.Redis, app_ids: list[str]) -> dict[str, float]:
    """The mean MEMORY USAGE of the keys an application's endpoints make for it."""
    return {
        "app_endpoints": _mean_usage(client, (keys.app_endpoints(a) for a in app_ids)),
        "subscriptions": _mean_usage(client, (keys.sub_type(a, EVENT_TYPE) for a in app_ids)),
    }


def _key_sizes(
    client: redis.Redis,
    app_ids: list[str],
    endpoint_ids: list[str],
    first: dict[str, float],
    per_app: int,
) -> dict[str, float]:
    """MEMORY USAGE of each part of an application and of an endpoint: a key of their own
    (the mean of a sample), or their share of a shared one (its size over its entries). The
    application's endpoints zset and subscription set are split into the key's own bytes
    and each endpoint's entry, from their sizes with one endpoint and with all of them."""
    last = _app_key_sizes(client, app_ids)
    zset_own, zset_entry = split_entries(first["app_endpoints"], last["app_endpoints"], per_app)
    set_own, set_entry = split_entries(first["subscriptions"], last["subscriptions"], per_app)
    return {
        "app_hash": _mean_usage(client, (keys.app(a) for a in app_ids)),
        "apps_uid_entry": _entry_usage(client, "apps_uid", "HLEN"),
        "apps_entry": _entry_usage(client, "apps", "ZCARD"),
        "app_endpoints_own": zset_own,
        "subscriptions_own": set_own,
        "endpoint_hash": _mean_usage(client, (keys.endpoint(e) for e in endpoint_ids)),
        "subscriptions_entry": set_entry,
        "app_endpoints_entry": zset_entry,
        "endpoints_entry": _entry_usage(client, "endpoints", "ZCARD"),
        "endpoint_seqs_entry": _entry_usage(client, "endpoint_seqs", "HLEN"),
    }


async def _measure(rig: Rig, request: RequestFactory, sizes: Sizes) -> dict[str, Any]:
    """One open loop from a clean start: latencies, CPU per 202, what the 202s said."""
    _clear_traffic(rig)
    rig.settle()
    # What earlier runs (or anyone else) left to be written back goes to disk first, so
    # that the AOF's fsync does not queue behind it during the run.
    await asyncio.to_thread(os.sync)
    api, scheduler = rig.children["api"], rig.children["scheduler"]
    fanouts: Counter[int] = Counter()

    def on_reply(_index: int, status: int, body: bytes, _at: float) -> None:
        if status == 202:
            fanouts[int(orjson.loads(body)["deliveries"])] += 1

    load_avg = os.getloadavg()[0]
    rig.redis.latency_reset()
    rig.redis.slowlog_reset()
    scripts_before = _script_stats(rig)
    api_cpu, scheduler_cpu, valkey_cpu = (
        api.cpu_seconds(),
        scheduler.cpu_seconds(),
        rig.valkey_cpu(),
    )
    load = await open_loop(
        rig.api_port, request, sizes.rate, sizes.seconds, on_reply=on_reply, drain_timeout=10.0
    )
    accepted = max(1, load.statuses[202])
    api_cpu, valkey_cpu = api.cpu_seconds() - api_cpu, rig.valkey_cpu() - valkey_cpu
    calls, usec = (now - then for now, then in zip(_script_stats(rig), scripts_before, strict=True))
    stalls = {str(row[0]): int(row[3]) for row in rig.redis.latency_latest()}
    slow = [_slow_entry(entry) for entry in rig.redis.slowlog_get(_SLOW_KEPT)]
    # The shipper's share: the outbox it takes to SQL, until it has the run's last record.
    await rig.until_shipped()
    scheduler_cpu = scheduler.cpu_seconds() - scheduler_cpu
    return {
        "sent": load.sent,
        "accepted": load.statuses[202],
        "errors": load.errors,
        "statuses": {str(s): n for s, n in sorted(load.statuses.items())},
        "fanouts": {str(f): n for f, n in sorted(fanouts.items())},
        "p50_ms": percentile(load.latencies_ms, 50),
        "p99_ms": percentile(load.latencies_ms, 99),
        "max_ms": max(load.latencies_ms, default=float("nan")),
        "api_cpu_ms": 1000 * api_cpu / accepted,
        "valkey_cpu_ms": 1000 * valkey_cpu / accepted,
        "api_valkey_cpu_ms": 1000 * (api_cpu + valkey_cpu) / accepted,
        "scheduler_cpu_ms": 1000 * scheduler_cpu / accepted,
        "valkey_script_us": usec / max(1, calls),
        "valkey_stalls_ms": stalls,
        "valkey_slow_commands": slow,
        "load_avg_1m": load_avg,
        "apps_in_store": sum(int(rig.redis.zcard(keys.apps(b))) for b in keys.all_buckets()),
    }


def _slow_entry(entry: dict[str, Any]) -> dict[str, Any]:
    """A slow log entry as JSON can hold it: the command cut short, and how long it ran."""
    command = entry["command"]
    text = command.decode(errors="replace") if isinstance(command, bytes) else str(command)
    return {"ms": int(entry["duration"]) / 1000, "command": text[:200]}


def _script_stats(rig: Rig) -> tuple[int, int]:
    """Script calls Valkey has run and the microseconds they took, by its own count: the
    ingest script's time inside the server, whatever the machine's other load does to the
    processes around it."""
    row = rig.redis.info("commandstats").get("cmdstat_fcall", {})
    return int(row.get("calls", 0)), int(row.get("usec", 0))


class Setups:
    """Which setup database 0 holds, and the swap that changes it."""

    def __init__(self, rig: Rig) -> None:
        self._rig = rig
        self.current = "A"

    def use(self, setup: str) -> None:
        if setup != self.current:
            self._rig.redis.swapdb(0, _SPARE_DB)
            self.current = setup


async def _run(sizes: Sizes, directory: Path) -> dict[str, Any]:
    started = time.monotonic()
    out: dict[str, Any] = {
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "uptime_before": _uptime(),
        "sizes": asdict(sizes),
    }
    rig = await Rig.start(directory, log_level="INFO")
    try:
        # Valkey notes every stall of its own past this many ms (a fork, an fsync waited
        # for, a slow command): a run's slow answers are told from the machine's.
        rig.redis.config_set("latency-monitor-threshold", _STALL_MS)
        # And the commands that took that long themselves, with their arguments.
        rig.redis.config_set("slowlog-log-slower-than", _STALL_MS * 1000)
        app_id = await _target(rig, sizes.endpoints)
        request = _ingest_request(rig)
        # Scripts loaded, connections open, the API's first requests behind it.
        await closed_loop(rig.api_port, request, connections=8, count=300)
        await rig.until_shipped()
        _clear_traffic(rig)
        copied = _copy_to_spare(rig)
        _log(
            started,
            f"A: application {app_id} and {sizes.endpoints} endpoints; {copied} keys copied to B",
        )
        filled = await _fill(rig, sizes, started)
        out["fill_seconds"] = filled.seconds
        figures = memory_figures(filled.readings)
        out["memory"] = {
            "readings": asdict(filled.readings),
            "figures": {**asdict(figures), "idle_app": figures.idle_app},
            "keys": filled.keys,
        }
        setups = Setups(rig)
        runs: dict[str, list[dict[str, Any]]] = {"A": [], "B": []}
        for round_ in range(sizes.rounds):
            for setup in ("A", "B"):
                setups.use(setup)
                run = await _measure(rig, request, sizes)
                runs[setup].append(run)
                if (run["apps_in_store"] >= sizes.apps) != (setup == "B"):
                    raise RuntimeError(f"{setup} ran on {run['apps_in_store']} applications")
                _log(started, f"round {round_ + 1} {setup}: p50 {run['p50_ms']:.2f} ms, "
                     f"p99 {run['p99_ms']:.2f} ms, API+Valkey {run['api_valkey_cpu_ms']:.3f} "
                     f"ms CPU per 202, {run['errors']} errors; applications in the store: "
                     f"{run['apps_in_store']:,}; Valkey's stalls (ms): "
                     f"{run['valkey_stalls_ms']}")  # fmt: skip
                for entry in run["valkey_slow_commands"]:
                    _log(started, f"  slow in Valkey: {entry['ms']:.1f} ms {entry['command'][:80]}")
        out["runs"] = runs
        out["valkey"] = rig.redis.info("server").get("valkey_version", "?")
    finally:
        await rig.close()
    out["uptime_after"] = _uptime()
    out["seconds"] = round(time.monotonic() - started, 1)
    return out


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def comparisons(runs: dict[str, list[dict[str, Any]]]) -> list[Comparison]:
    a, b = runs["A"], runs["B"]

    def figure(name: str, key: str, unit: str, target: float | None = None) -> Comparison:
        return compare(name, unit, [r[key] for r in a], [r[key] for r in b], target)

    return [
        figure("202 latency p50", "p50_ms", "ms", RATIO_TARGET),
        figure("202 latency p99", "p99_ms", "ms", RATIO_TARGET),
        figure("202 latency max", "max_ms", "ms"),
        figure("API + Valkey CPU per 202", "api_valkey_cpu_ms", "ms CPU", RATIO_TARGET),
        figure("  API CPU per 202", "api_cpu_ms", "ms CPU"),
        figure("  Valkey CPU per 202", "valkey_cpu_ms", "ms CPU"),
        figure("scheduler (shipper) CPU per 202", "scheduler_cpu_ms", "ms CPU"),
        figure("Valkey's time per script call (its commandstats)", "valkey_script_us", "µs"),
        figure("errors (non-202, unanswered)", "errors", ""),
    ]


def memory_lines(memory: dict[str, Any], per_app: int) -> list[str]:
    """The memory figures as a Markdown table: ``used_memory`` growth, then MEMORY USAGE."""
    f, k = memory["figures"], memory["keys"]
    app_keys = [
        "app_hash",
        "apps_uid_entry",
        "apps_entry",
        "app_endpoints_own",
        "subscriptions_own",
    ]
    endpoint_keys = [
        "endpoint_hash", "subscriptions_entry", "app_endpoints_entry", "endpoints_entry",
        "endpoint_seqs_entry",
    ]  # fmt: skip
    labels = {
        "app_hash": "`app:{app}` hash",
        "apps_uid_entry": "its entry in `apps:uid`",
        "apps_entry": "its entry in `apps`",
        "app_endpoints_own": "`app:{app}:endpoints` zset, the key's own bytes",
        "subscriptions_own": "`sub:type:{app}:{type}` set, the key's own bytes",
        "endpoint_hash": "`endpoint:{ep}` hash (a sealed secret, no headers)",
        "subscriptions_entry": "its entry in `sub:type:{app}:{type}`",
        "app_endpoints_entry": "its entry in `app:{app}:endpoints`",
        "endpoints_entry": "its entry in `endpoints`",
        "endpoint_seqs_entry": "its entry in `endpoints:seqs`",
    }
    readings = memory["readings"]
    apps = readings["apps"]
    grown = readings["after_rounds"][-1] - readings["before"]
    lines = [
        "| what | bytes |",
        "|---|---:|",
        f"| `used_memory` growth, {apps:,} applications x {per_app} endpoints "
        f"| {grown:,} ({grown / 2**20:.1f} MiB) |",
        f"| an application with its {per_app} endpoints (`used_memory`) "
        f"| {f['app_with_endpoints']:,.0f} |",
        f"| **an idle application** (`used_memory`: with no endpoint {f['app_alone']:,.0f}, "
        f"the keys its first endpoint makes for it {f['app_keys']:,.0f}) "
        f"| **{f['idle_app']:,.0f}** |",
    ]
    lines += [f"| &nbsp;&nbsp;{labels[n]} (MEMORY USAGE) | {k[n]:,.0f} |" for n in app_keys]
    lines.append(f"| &nbsp;&nbsp;sum of those | {sum(k[n] for n in app_keys):,.0f} |")
    lines.append(f"| **an endpoint** (`used_memory`, rounds 2 on) | **{f['endpoint']:,.0f}** |")
    lines += [f"| &nbsp;&nbsp;{labels[n]} (MEMORY USAGE) | {k[n]:,.0f} |" for n in endpoint_keys]
    lines.append(f"| &nbsp;&nbsp;sum of those | {sum(k[n] for n in endpoint_keys):,.0f} |")
    return lines


def report(result: dict[str, Any]) -> str:
    sizes = result["sizes"]
    b_label = f"B: {sizes['apps']:,} applications"
    lines = [
        f"Run of {result['at']} (commit {result['machine']['commit']}"
        f"{', tree dirty' if result['machine']['tree_dirty'] else ''}, Valkey {result['valkey']}), "
        f"{result['seconds']} s.",
        "",
        f"Machine load before: `{result['uptime_before']}`; after: `{result['uptime_after']}`.",
        "",
        f"Ingest into one application, {sizes['endpoints']} endpoints each, {sizes['rate']:g} ev/s "
        f"for {sizes['seconds']:g} s a run, {sizes['rounds']} rounds of A then B (median of the "
        "rounds; low-high):",
        "",
        *comparison_lines(comparisons(result["runs"]), b_label),
        "",
        "Redis memory (B, after a settle):",
        "",
        *memory_lines(result["memory"], sizes["endpoints"]),
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--apps", type=int, default=10_000, help="applications in B")
    parser.add_argument("--endpoints", type=int, default=3, help="per application (at least 2)")
    parser.add_argument("--rate", type=float, default=300.0, help="events/s of each run")
    parser.add_argument("--seconds", type=float, default=6.0, help="of each run")
    parser.add_argument("--rounds", type=int, default=10, help="of A then B")
    parser.add_argument("--keep", action="store_true", help="keep the processes' logs and data")
    args = parser.parse_args()
    if args.endpoints < 2 or args.apps < 2 or args.rounds < 1:
        parser.error("needs --apps >= 2, --endpoints >= 2 and --rounds >= 1")
    sizes = Sizes(args.apps, args.endpoints, args.rate, args.seconds, args.rounds)
    with scratch("whs-bench-apps-", args.keep) as directory:
        result = {"machine": machine(), **uvloop.run(_run(sizes, directory))}
    save_json("apps", result)
    text = report(result)
    (RESULTS / "apps.md").write_text(text)
    print("\n" + text)
    print(f"results in {RESULTS / 'apps.json'} and apps.md")


if __name__ == "__main__":
    main()
