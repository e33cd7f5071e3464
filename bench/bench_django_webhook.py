"""Delivery against django-webhook: ``python -m bench.bench_django_webhook [--deliveries N]
[--rounds R] [--endpoints 1,10] [--keep]``.

The second baseline of issue 21. One rig (bench/rig.py: Valkey with AOF, our API, the
scheduler, the verifying receiver), one PostgreSQL (tests/support/postgres.py) for the
peer's Django project (bench/django_baseline/, run from its own venv,
``.venv-django-webhook/``, built on first use). Both workers run 2 prefork processes on the
same Valkey (theirs on its own queue) against the same receiver, which verifies each side's
signature scheme. Each round loads a backlog while the worker is paused (ours through the
API, theirs as model saves that fire webhooks), resumes it and times first arrival to last
(bench/delivery.py ``drain``); rounds alternate ours, theirs. Results go to
bench/results/django_webhook.json and .md.
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

from bench.delivery import drain, ours
from bench.report import CPU, Row, markdown_table, text_table
from bench.rig import Rig, Workers
from bench.run import RESULTS, run_widths, widths_parser
from bench.stats import spread
from signer import generate_secret
from tests.support.postgres import SUPERUSER, Postgres, start_postgres

PEER_VENV = Path(".venv-django-webhook")
# packaging: kombu's Redis transport imports it without declaring it.
PEER_PACKAGES = ("django-webhook", "django", "celery", "redis", "psycopg[binary]", "packaging")
PROJECT = Path(__file__).resolve().parent / "django_baseline"
QUEUE = "django_webhook"  # CELERY_TASK_DEFAULT_QUEUE in dwb_settings.py
WORKERS = 2
FIGURES = ("rate", "worker_cpu_ms", "valkey_cpu_ms")
# Run a program other than our interpreter through bench/procs.py's spawn, which starts
# ``sys.executable``: exec keeps the pid, so the Child still is the worker's main process.
_EXEC = "import os, sys; os.chdir(sys.argv[1]); os.execv(sys.argv[2], sys.argv[2:])"


def peer_python() -> Path:
    """The peer venv's interpreter, the venv built first if it is not there yet."""
    python = PEER_VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(PEER_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *PEER_PACKAGES], check=True)
    return python.absolute()


def peer_env(rig: Rig, server: Postgres) -> dict[str, str]:
    database = urlsplit(server.create_database()).path.lstrip("/")
    return {
        "DJANGO_SETTINGS_MODULE": "dwb_settings",
        "DWB_DB_NAME": database,
        "DWB_DB_USER": SUPERUSER,
        "DWB_DB_PORT": str(server.port),
        "DWB_BROKER_URL": rig.valkey.url,
    }


async def peer_worker(rig: Rig, python: Path, env: dict[str, str]) -> Workers:
    node = f"dwh@{socket.gethostname()}"
    child = rig.launch(
        "django-webhook",
        [
            "-c", _EXEC, str(PROJECT), str(python),
            "-m", "celery", "-A", "dwb_celery", "worker", "-Q", QUEUE,
            "--concurrency", str(WORKERS), "--loglevel", "INFO",
            "--without-mingle", "--without-gossip", "--hostname", node,
        ],
        **env,
    )  # fmt: skip
    pool = Workers(child, node, QUEUE, WORKERS)
    await rig.until_ready(pool)
    return pool


async def theirs(
    rig: Rig, pool: Workers, python: Path, env: dict[str, str], endpoints: int, deliveries: int
) -> dict[str, Any]:
    await rig.pause(pool)
    rig.reset()
    rig.redis.unlink(QUEUE)
    await rig.receiver.reset()
    secrets = {f"dwh-{endpoints}-{n}": generate_secret(24) for n in range(endpoints)}
    await rig.receiver.set_secrets(secrets)
    targets = {rig.receiver.url(name): secret for name, secret in secrets.items()}
    events = max(1, deliveries // endpoints)
    await asyncio.to_thread(
        subprocess.run,
        [str(python), "dwb_load.py", str(events), orjson.dumps(targets).decode()],
        cwd=PROJECT,
        env={**rig.env, **env},
        check=True,
    )
    return await drain(rig, pool, events * endpoints)


async def measure(
    directory: Path, endpoint_counts: list[int], deliveries: int, rounds: int
) -> dict[str, Any]:
    python = await asyncio.to_thread(peer_python)
    server = await asyncio.to_thread(start_postgres)
    rig = await Rig.start(directory, log_level="INFO")
    try:
        env = await asyncio.to_thread(peer_env, rig, server)
        pool = await peer_worker(rig, python, env)
        result: dict[str, Any] = {}
        for endpoints in endpoint_counts:
            runs: dict[str, list[dict[str, Any]]] = {"ours": [], "theirs": []}
            for _ in range(rounds):
                runs["ours"].append(await ours(rig, endpoints, deliveries, WORKERS))
                await rig.pause(rig.pools["ours"])
                runs["theirs"].append(await theirs(rig, pool, python, env, endpoints, deliveries))
                await rig.pause(pool)
            result[str(endpoints)] = {
                side: {**{f: spread([r[f] for r in rs]) for f in FIGURES}, "runs": rs}
                for side, rs in runs.items()
            }
        return result
    finally:
        await rig.close()
        await asyncio.to_thread(server.destroy)


# Issue 21's target: deliveries/s at least this many times the peer's.
TARGET = 15.0


def table(by_endpoints: dict[str, Any]) -> list[Row]:
    """bench/report.py's rows: medians with their spread, ours beside theirs and the ratio
    (ours ÷ theirs for the rate, theirs ÷ ours for CPU: above 1, ours better)."""
    out: list[Row] = []
    for endpoints, sides in by_endpoints.items():
        ours_m, theirs_m = sides["ours"], sides["theirs"]
        rate = Row(
            "delivery",
            f"deliveries/s, {endpoints} endpoint(s)",
            ours_m["rate"],
            "/s",
            "higher",
            theirs_m["rate"],
            "django-webhook",
            f"≥ {TARGET:g}x",
        )
        out += [
            dataclasses.replace(rate, met=(rate.ratio or 0.0) >= TARGET),
            Row("delivery", f"  worker CPU per delivery, {endpoints} endpoint(s)",
                ours_m["worker_cpu_ms"], CPU, "lower", theirs_m["worker_cpu_ms"], "django-webhook"),
            Row("delivery", f"  Valkey CPU per delivery, {endpoints} endpoint(s)",
                ours_m["valkey_cpu_ms"], CPU, "lower", theirs_m["valkey_cpu_ms"], "django-webhook"),
        ]  # fmt: skip
    return out


def delivered(by_endpoints: dict[str, Any]) -> str:
    """Every round's deliveries that arrived verified, of those loaded."""
    return "; ".join(
        f"{endpoints} endpoint(s), {side}: "
        + ", ".join(f"{r['delivered']}/{r['expected']}" for r in sides[side]["runs"])
        for endpoints, sides in by_endpoints.items()
        for side in ("ours", "theirs")
    )


def main() -> None:
    args = widths_parser(__doc__, deliveries=4000).parse_args()
    result, saved = run_widths("django_webhook", args, measure, workers=WORKERS)
    by_endpoints = result["by_endpoints"]
    rows, arrived = table(by_endpoints), f"Delivered, verified: {delivered(by_endpoints)}."
    (RESULTS / "django_webhook.md").write_text(f"{markdown_table(rows)}\n\n{arrived}\n")
    print(f"{text_table(rows)}\n\n{arrived}\n{result['seconds']} s; results in {saved}")


if __name__ == "__main__":
    main()
