"""``webhook-service``: start the whole service (``up``) or one of its parts."""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence

from webhook_service import logs, tracing
from webhook_service.admin import cli as admin
from webhook_service.config import Settings
from webhook_service.crypto import generate_master_key
from webhook_service.private_files import private_dir, secret_file

log = logging.getLogger("webhook_service")

ROLES = ("api", "worker", "scheduler")


def _run_api(settings: Settings) -> int:
    from webhook_service.api.listener import serve
    from webhook_service.api.server import build_app
    from workers.celery_app import app

    tracing.setup("api")
    try:
        # The CLI wires the parts: the API publishes its wake-ups through the workers' app.
        serve(build_app(settings, app if settings.wake_workers else None), settings)
    finally:
        tracing.shutdown()  # the spans still buffered leave before the process does
    return 0


def _run_worker(settings: Settings) -> int:
    from webhook_service.store.keys import QUEUE_FRESH, QUEUE_RETRY
    from workers.celery_app import app

    app.worker_main(
        [
            "worker",
            "--queues", f"{QUEUE_FRESH},{QUEUE_RETRY}",
            "--concurrency", str(settings.worker_concurrency),
            "--loglevel", settings.log_level,
            "--hostname", f"whs-{os.getpid()}@%h",
            "--without-mingle", "--without-gossip",
        ]
    )  # fmt: skip
    return 0


def _run_scheduler(settings: Settings) -> int:
    from webhook_service.history.database import sync_engine
    from webhook_service.history.shipper import Shipper, start_thread
    from webhook_service.store.connect import RedisTimeouts, sync_client
    from webhook_service.wakeup import CeleryWaker
    from workers.celery_app import app
    from workers.scheduler import Scheduler

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    client = sync_client(settings.effective_redis_url, RedisTimeouts.of(settings))
    # The shipper has a thread of its own: a slow or absent SQL database never holds up
    # the due deliveries.
    tracing.setup("scheduler")
    try:
        scheduler = Scheduler(client, CeleryWaker(app, settings.batch_size), settings)
        # Both work on the buckets whose leases the scheduler's passes hold.
        shipper = Shipper(client, sync_engine(settings), settings, scheduler.leases)
        shipping = start_thread(shipper, stop)
        scheduler.run(stop)
        shipping.join(settings.log_timeout * 2)
    finally:
        tracing.shutdown()
    return 0


def _run_up(settings: Settings) -> int:
    from webhook_service.embedded import start_valkey

    # Private: it holds the master key, the admin key, and the Valkey password and AOF.
    data_dir = private_dir(settings.data_dir.resolve())
    env = dict(os.environ)
    if settings.master_key is None:
        env["WEBHOOK_MASTER_KEY"] = secret_file(data_dir / "master.key", generate_master_key())
    if settings.admin_key is None:
        env["WEBHOOK_ADMIN_KEY"] = secret_file(
            data_dir / "admin.key", "whadm_" + secrets.token_urlsafe(24)
        )
    if settings.log_url is None:
        from webhook_service.history.database import sync_engine, upgrade

        # The embedded log is ours to migrate; a PostgreSQL one is the operator's
        # (`webhook-service migrate`).
        upgrade(sync_engine(settings))
    valkey = None
    if settings.redis_url is None:
        valkey = start_valkey(data_dir / "valkey")
        env["WEBHOOK_REDIS_URL"] = valkey.url
        # Not the URL: it holds the password.
        log.info(
            "embedded Valkey with AOF on 127.0.0.1:%s, data in %s", valkey.port, valkey.directory
        )
    children: dict[str, subprocess.Popen[bytes]] = {}
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        # The API first: it checks the server (noeviction, AOF) and refuses a bad one. In
        # tick mode it is the only one (ticks do the others' work).
        for role in ROLES if settings.mode == "service" else ("api",):
            children[role] = subprocess.Popen(  # noqa: S603 - our own interpreter and module
                [sys.executable, "-m", "webhook_service", role], env=env
            )
        admin = env.get("WEBHOOK_ADMIN_KEY") or (
            settings.admin_key.get_secret_value() if settings.admin_key else ""
        )
        print(
            f"\nwebhook-service is up\n  API:       http://{settings.host}:{settings.port}\n"
            f"  admin key: {admin}\n  data:      {data_dir}\nCtrl-C stops everything.\n",
            flush=True,
        )
        while not stop.wait(0.5):
            dead = [role for role, child in children.items() if child.poll() is not None]
            if dead:
                log.error("%s exited; stopping the service", ", ".join(dead))
                return 1
        return 0
    finally:
        _stop_children(children)
        if valkey is not None:
            valkey.stop()
        log.info("stopped")


def _stop_children(children: dict[str, subprocess.Popen[bytes]]) -> None:
    for child in children.values():
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 30
    for child in children.values():
        try:
            child.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def _log_refusal(settings: Settings) -> str | None:
    """Why the API or the scheduler must not start on the log's database; None: it may. One
    that cannot be reached now is no reason: delivery goes on while the log is away, and
    what needs it answers 503 until it is back."""
    import sqlalchemy as sa

    from webhook_service.history.database import (
        LogUnconfigured,
        check_current,
        read_url,
        sync_engine,
    )

    try:
        read_url(settings)  # refused here, in one line, rather than by the API's start
        engine = sync_engine(settings)
    except LogUnconfigured as exc:
        return str(exc)
    try:
        return check_current(engine)
    except sa.exc.DBAPIError as exc:
        log.warning(
            "the delivery log's database cannot be reached (%s); starting without checking "
            "its revision",
            str(exc.orig).splitlines()[0][:200] if str(exc.orig) else type(exc.orig).__name__,
        )
        return None
    finally:
        engine.dispose()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="webhook-service", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("up", help="start everything, with an embedded Valkey if needed")
    commands.add_parser("api", help="run the HTTP API")
    commands.add_parser("worker", help="run a Celery delivery worker")
    commands.add_parser("scheduler", help="run the scheduler (retries, lost wake-ups)")
    commands.add_parser("generate-master-key", help="print a new WEBHOOK_MASTER_KEY")
    commands.add_parser(
        "rotate-master-key", help="re-seal endpoint secrets under a new master key", add_help=False
    )
    commands.add_parser(
        "migrate", help="bring the store up to this release's schema, once", add_help=False
    )
    # endpoints, events, deliveries, stats: clients of a running API, configured by their own
    # --url/--key, never by the service's settings.
    admin.register(commands)
    raw = list(sys.argv[1:] if argv is None else argv)
    if raw[:1] == ["rotate-master-key"]:
        from webhook_service.rekey import main as rotate_master_key

        return rotate_master_key(raw[1:])
    if raw[:1] == ["migrate"]:
        from webhook_service.migrate import main as migrate

        return migrate(raw[1:])
    args = parser.parse_args(raw)
    if getattr(args, "admin", None) is not None:
        return admin.run(args)
    if args.command == "generate-master-key":
        print(generate_master_key())
        return 0
    if args.command in ROLES:
        # Every role loads the Celery app (to consume, or to publish wake-ups), whose module
        # builds the process's one Settings: the same object serves the CLI here.
        from workers.celery_app import SETTINGS as settings
    else:
        settings = Settings()
    logs.setup(settings, args.command)
    if settings.mode == "tick" and args.command in ("worker", "scheduler"):
        # Ticks claim, send and ship the log: a worker would get no wake-up, and a
        # scheduler's would pile up unconsumed.
        log.error(
            "WEBHOOK_MODE=tick runs the API alone (POST /v1/cron/tick sends): no %s", args.command
        )
        return 1
    if args.command in ROLES:
        from webhook_service.store.connect import RedisTimeouts
        from webhook_service.store.schema import start_check

        # No process serves a store of another schema (the read path has no legacy branch).
        timeouts = RedisTimeouts.of(settings)
        if (refused := start_check(settings.effective_redis_url, timeouts)) is not None:
            log.error("%s", refused)
            return 1
        # Nor on a log of another revision; a worker never opens the log.
        if args.command != "worker" and (refused := _log_refusal(settings)) is not None:
            log.error("%s", refused)
            return 1
    runners = {
        "up": _run_up,
        "api": _run_api,
        "worker": _run_worker,
        "scheduler": _run_scheduler,
    }
    return runners[args.command](settings)
