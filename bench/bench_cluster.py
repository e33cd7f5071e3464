"""The store on a 3-primary Valkey Cluster against one Valkey, in the same run (issue 20).

    python -m bench.bench_cluster [--apps 300] [--events 3000] [--rate 300] [--rounds 2] [--keep]

Each round runs both layouts, one after the other, each from nothing: the store (one Valkey,
or three primaries formed by tests/support/cluster.py, every node with AOF ``everysec``),
a Celery broker apart (a plain Valkey: a cluster cannot be the broker, so the single node
gets one too and the two layouts differ only in the store), the API, one worker and the
scheduler (its log shipper and releases included) as real processes, and the bench's
verifying receiver. ``--apps`` applications with one endpoint each; ``--events`` events
spread over them round robin, an open loop at ``--rate``, while the worker delivers.

Measured from just before the first event to the moment the last delivery arrived and the
outboxes were shipped (so the shipper's trims and the releases count): each store process's
CPU (user + system, from /proc), per delivery summed over the primaries, and each primary's
share of the sum. Prints the cluster's CPU per delivery against the single node's (target
≤ 1.3x) and each primary's share against a third (target within ±25 % of it); writes
``bench/results/cluster.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from bench.http_load import build_request, open_loop
from bench.procs import Child, free_port, spawn, wait_port
from bench.receiver import ReceiverControl
from tests.support.cluster import running
from tests.support.stack import ADMIN_KEY, Stack, migrate_log, service_env, settings_of
from webhook_service.embedded import EmbeddedValkey, start_valkey
from webhook_service.history.shipper import outbox_length
from webhook_service.store.connect import RedisTimeouts, sync_client

OUT = Path(__file__).resolve().parent / "results" / "cluster.json"
TYPE = "bench.cluster"
_AUTH = {"Authorization": f"Bearer {ADMIN_KEY}"}


@contextmanager
def _single(directory: Path) -> Iterator[tuple[str, list[EmbeddedValkey]]]:
    node = start_valkey(directory / "store")
    try:
        yield node.url, [node]
    finally:
        node.stop()


@contextmanager
def _cluster(directory: Path) -> Iterator[tuple[str, list[EmbeddedValkey]]]:
    with running(directory / "cluster", aof=True) as formed:
        yield formed.url(), list(formed.nodes)


async def _applications(
    session: aiohttp.ClientSession, base: str, receiver: ReceiverControl, count: int
) -> list[str]:
    """``count`` applications with one endpoint each; their ids."""
    ids: list[str] = []
    secrets: dict[str, str] = {}
    for n in range(count):
        uid = f"bench-app-{n}"
        async with session.post(
            f"{base}/v1/applications", json={"name": uid, "uid": uid}, headers=_AUTH
        ) as reply:
            app = await reply.json()
            assert reply.status == 201, app
        async with session.post(
            f"{base}/v1/applications/{app['id']}/endpoints",
            json={"url": receiver.url(uid), "event_types": [TYPE]},
            headers=_AUTH,
        ) as reply:
            endpoint = await reply.json()
            assert reply.status == 201, endpoint
        ids.append(app["id"])
        secrets[uid] = endpoint["secret"]
    await receiver.set_secrets(secrets)
    return ids


async def _measure(layout: str, args: argparse.Namespace, directory: Path) -> dict[str, Any]:
    store = _cluster if layout == "cluster" else _single
    with store(directory) as (url, nodes):
        broker = start_valkey(directory / "broker")
        port, receiver_port = free_port(), free_port()
        env = service_env(
            url,
            {
                "WEBHOOK_BROKER_URL": broker.url,
                "WEBHOOK_DATA_DIR": str(directory),
                "WEBHOOK_PORT": str(port),
                "WEBHOOK_LOG_LEVEL": "WARNING",
                "WEBHOOK_RETRY_SCHEDULE": "0,5,30,60",
            },
        )
        migrate_log(env)
        stack = Stack(directory, broker, env)
        receiver = spawn("receiver", ["-m", "bench.receiver", "--port", str(receiver_port)],
                         env, directory)  # fmt: skip
        try:
            for role in ("api", "worker", "scheduler"):
                stack.start(role)
            wait_port(Child("api", stack.processes["api"]), port)
            wait_port(receiver, receiver_port)
            async with aiohttp.ClientSession() as session:
                control = ReceiverControl(receiver_port, session)
                base = f"http://127.0.0.1:{port}"
                apps = await _applications(session, base, control, args.apps)
                bodies = [
                    build_request(
                        "POST",
                        f"/v1/applications/{app}/events",
                        port,
                        orjson.dumps({"type": TYPE, "data": {"app": app, "pad": "x" * 60}}),
                        {**_AUTH, "Content-Type": "application/json"},
                    )
                    for app in apps
                ]
                processes = [Child(f"node{n}", node.process) for n, node in enumerate(nodes)]
                before = [p.cpu_seconds() for p in processes]
                began = time.perf_counter()
                load = await open_loop(
                    port, lambda i: bodies[i % len(bodies)], args.rate, args.events / args.rate
                )
                accepted = load.statuses.get(202, 0)
                stats = await control.wait_for(accepted)
                _shipped(env)
                elapsed = time.perf_counter() - began
                spent = [p.cpu_seconds() - b for p, b in zip(processes, before, strict=True)]
        finally:
            receiver.stop()
            stack.stop()
    delivered = int(stats["received"])
    total = sum(spent)
    return {
        "layout": layout,
        "accepted": accepted,
        "answers": {str(code): n for code, n in sorted(load.statuses.items())},
        "errors": load.errors,
        "delivered": delivered,
        "rejected_signatures": stats["rejected"],
        "seconds": round(elapsed, 2),
        "cpu_ms_per_delivery": 1000 * total / max(1, delivered),
        "shares": [s / total for s in spent] if total else [],
    }


def _shipped(env: dict[str, str], timeout: float = 60.0) -> None:
    """Until every outbox is empty: the shipper's work is part of what a delivery costs."""
    settings = settings_of(env)
    client = sync_client(settings.effective_redis_url, RedisTimeouts.of(settings))
    try:
        deadline = time.monotonic() + timeout
        while outbox_length(client) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        client.close()


def _report(runs: list[dict[str, Any]]) -> str:
    lines = []
    single = [r for r in runs if r["layout"] == "single"]
    cluster = [r for r in runs if r["layout"] == "cluster"]
    for one, three in zip(single, cluster, strict=True):
        ratio = three["cpu_ms_per_delivery"] / one["cpu_ms_per_delivery"]
        worst = max(abs(s * 3 - 1) for s in three["shares"])
        shares = ", ".join(f"{s:.1%}" for s in three["shares"])
        lines.append(
            f"single {one['cpu_ms_per_delivery']:.3f} ms/delivery ({one['delivered']} in "
            f"{one['seconds']} s); cluster {three['cpu_ms_per_delivery']:.3f} ms/delivery "
            f"({three['delivered']} in {three['seconds']} s): {ratio:.2f}x "
            f"(target ≤ 1.3x {'yes' if ratio <= 1.3 else 'NO'}); primaries' shares {shares}, "
            f"worst {worst:.0%} off a third (target ≤ 25 % {'yes' if worst <= 0.25 else 'NO'})"
        )
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--apps", type=int, default=300)
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--rate", type=float, default=300.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--keep", action="store_true", help="keep each layout's directory")
    args = parser.parse_args()
    runs: list[dict[str, Any]] = []
    for round_ in range(args.rounds):
        for layout in ("single", "cluster"):
            home = Path(tempfile.mkdtemp(prefix=f"bench-{layout}-"))
            try:
                run = await _measure(layout, args, home)
            finally:
                if not args.keep:
                    shutil.rmtree(home, ignore_errors=True)
            print(round_, json.dumps(run), flush=True)
            runs.append(run)
    print(_report(runs))
    OUT.write_text(json.dumps(runs, indent=2) + "\n")


if __name__ == "__main__":
    asyncio.run(main())
