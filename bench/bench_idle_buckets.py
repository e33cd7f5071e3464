"""What the buckets cost an idle store (docs/scaling.md, "Buckets"): the scheduler's and the
shipper's passes poll every bucket (the due sets, the outboxes, the release sets, the
operational event requests), with nothing to do. Runs the real passes against a Valkey of
its own for ``SECONDS`` at their default intervals (scheduler 0.5 s, shipper 0.2 s), once
with keys.BUCKETS buckets and once with 1, and prints Valkey's CPU (INFO cpu, user + sys)
and commands per second for each.

    .venv/bin/python -m bench.bench_idle_buckets
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import redis

from tests.support.stack import settings_of
from webhook_service.embedded import start_valkey
from webhook_service.history.database import sync_engine, upgrade
from webhook_service.history.shipper import Shipper
from webhook_service.store import keys
from webhook_service.store.connect import sync_client
from workers.scheduler import Scheduler

SECONDS = 20.0


class _NoPublisher:
    def wake_sync(self, delivery_ids: Sequence[str], *, retry: bool) -> None:
        raise AssertionError("an idle store has nothing to wake")


def _cpu(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def _commands(client: redis.Redis) -> int:
    return int(client.info("stats")["total_commands_processed"])


def measure(buckets: int, directory: Path) -> tuple[float, float]:
    """Valkey's CPU (ms a second) and commands a second, idle, with this many buckets."""
    server = start_valkey(directory / f"valkey-{buckets}")
    saved = keys.BUCKETS
    keys.BUCKETS = buckets
    try:
        settings = settings_of({"WEBHOOK_DATA_DIR": str(directory / f"data-{buckets}")})
        engine = sync_engine(settings)
        upgrade(engine)
        client = sync_client(server.url)
        scheduler = Scheduler(client, _NoPublisher(), settings)
        shipper = Shipper(client, engine, settings)
        cpu, commands, start = _cpu(client), _commands(client), time.monotonic()
        next_tick = next_ship = start
        while (now := time.monotonic()) < start + SECONDS:
            if now >= next_tick:
                scheduler.tick()
                next_tick = now + settings.scheduler_interval
            if now >= next_ship:
                shipper.ship_once()
                next_ship = now + settings.log_ship_interval
            time.sleep(max(0.0, min(next_tick, next_ship) - time.monotonic()))
        spent = time.monotonic() - start
        used = (_cpu(client) - cpu) * 1000 / spent
        rate = (_commands(client) - commands) / spent
        client.close()
        engine.dispose()
        return used, rate
    finally:
        keys.BUCKETS = saved
        server.stop()


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for buckets in (1, keys.BUCKETS):
            used, rate = measure(buckets, Path(tmp))
            print(f"{buckets:>3} buckets: Valkey {used:.2f} ms CPU/s idle, {rate:.0f} commands/s")


if __name__ == "__main__":
    main()
