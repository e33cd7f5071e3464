"""The delivery log's database away under load, then back.

Real processes: a Valkey with AOF, a Celery worker, and a scheduler whose shipper's log is a
PostgreSQL nobody runs (tests/support/log_away.py), so every batch it tries fails; an API
in-process, and a signature-verifying receiver behind three endpoints, one of which fails
one request in five, so retries (and with them the scheduler) are needed throughout. A
producer sends RATE events a second for SECONDS seconds, each with a 100-byte payload, and
/metrics and /readyz are read every second. The test asserts:

* every event is answered 202 and reaches all three endpoints, verified: delivery never
  waits for the log;
* /metrics shows the backlog growing and the lag growing with it; /readyz names the log
  ``lagging`` past its bound and stays 200;

then restarts the scheduler with the stack's own log (SQLite in its dir), and asserts:

* the outbox empties, and every attempt the receiver saw is in SQL exactly once.

It prints the figures in docs/reliability.md ("When the log's database is away"): outbox
records per event, the outbox's Redis memory per record (MEMORY USAGE on the stream), and
how fast the backlog ships once the log is back.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest
import redis.asyncio
import sqlalchemy as sa
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.conftest import Api, create_endpoint, serve_api, settings_for, wait_for
from tests.support.log_away import start_shipless_scheduler
from tests.support.receiver import Receiver
from tests.support.stack import ADMIN_KEY, Stack, start_stack
from webhook_service.history import tables
from webhook_service.history.database import sync_engine
from webhook_service.store import keys
from webhook_service.store.keys import OutboxField

pytestmark = pytest.mark.chaos

RATE = 30  # events a second
SECONDS = 15
ENDPOINTS = ("lag_a", "lag_b", "lag_c")
FLAKY = "lag_c"  # answers 500 to one request in five, at random (seeded)
LOG_MAX_LAG = 3.0
# Twelve tries, so that the flaky endpoint's one in five does not spend a delivery's budget
# (0.2^12 a delivery: once in some 500 000 runs; eight tries failed a run on a loaded
# machine). At random, not every fifth request: retries 0.3 s apart fall into step near the
# end of the load, and every fifth request was then the same delivery's, eight times over.
RETRY_SCHEDULE = ",".join(["0"] + ["0.3"] * 11)
PAYLOAD = {"pad": "x" * 90}  # with its key and braces, 100 bytes of JSON


@dataclass
class Sample:
    at: float  # seconds into the load
    backlog: float
    lag: float
    ready: int
    log_state: str


@dataclass
class Watch:
    samples: list[Sample] = field(default_factory=list)


async def _produce(api: Api, statuses: Counter[int], accepted: list[str]) -> None:
    async def send(n: int) -> None:
        status, body, _ = await api.call(
            "POST", "/v1/events", json={"type": "lag.test", "data": {"n": n, **PAYLOAD}}
        )
        statuses[status] += 1
        if status == 202:
            accepted.append(body["id"])

    started = time.monotonic()
    sends = []
    for n in range(RATE * SECONDS):
        await asyncio.sleep(max(0.0, started + n / RATE - time.monotonic()))
        sends.append(asyncio.create_task(send(n)))
    await asyncio.gather(*sends)


async def _observe(api: Api, watch: Watch, stop: asyncio.Event) -> None:
    started = time.monotonic()
    while not stop.is_set():
        auth = {"Authorization": f"Bearer {ADMIN_KEY}"}
        async with api.session.get(api.base + "/metrics", headers=auth) as response:
            text = await response.text()
        gauges = {
            s.name: s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
            if s.name in ("webhook_log_backlog", "webhook_log_lag_seconds")
        }
        status, ready, _ = await api.call("GET", "/readyz", key=None)
        watch.samples.append(
            Sample(
                time.monotonic() - started,
                gauges["webhook_log_backlog"],
                gauges["webhook_log_lag_seconds"],
                status,
                ready["checks"]["log"]["state"],
            )
        )
        await asyncio.sleep(1.0)


async def _record_sizes(store: redis.asyncio.Redis) -> dict[str, tuple[int, float]]:
    """Outbox records by kind: how many, and their fields' mean bytes (names and values)."""
    sizes: dict[str, list[int]] = {}
    entries = cast(list[tuple[str, dict[str, str]]], await store.xrange(keys.outbox(0)))
    for _, entry in entries:
        kind = next(f.name.lower() for f in OutboxField if f.value in entry)
        sizes.setdefault(kind, []).append(sum(len(k) + len(v) for k, v in entry.items()))
    return {kind: (len(n), sum(n) / len(n)) for kind, n in sizes.items()}


def _logged(stack: Stack, event_ids: set[str]) -> tuple[Counter[str], Counter[tuple[str, str]]]:
    """Event rows per event id, and attempt rows per (endpoint id, event id)."""
    engine = sync_engine(settings_for(stack))
    try:
        with engine.connect() as conn:
            events = conn.execute(sa.select(tables.events.c.id)).scalars().all()
            rows = conn.execute(
                sa.select(tables.deliveries.c.endpoint_id, tables.deliveries.c.event_id).join(
                    tables.attempts, tables.attempts.c.delivery_id == tables.deliveries.c.id
                )
            ).all()
    finally:
        engine.dispose()
    return Counter(e for e in events if e in event_ids), Counter(
        (row.endpoint_id, row.event_id) for row in rows if row.event_id in event_ids
    )


async def test_delivery_goes_on_while_the_log_is_away(tmp_path: Path) -> None:
    stack = start_stack(tmp_path, {"WEBHOOK_RETRY_SCHEDULE": RETRY_SCHEDULE}, scheduler=False)
    start_shipless_scheduler(stack)
    receiver = Receiver()
    flaky = random.Random(5)
    receiver.behaviours[FLAKY] = lambda _name, _n: 500 if flaky.random() < 0.2 else 200
    await receiver.start()
    store = redis.asyncio.Redis.from_url(stack.valkey.url, decode_responses=True)
    settings = settings_for(stack).model_copy(update={"log_max_lag": LOG_MAX_LAG})
    try:
        async with serve_api(settings) as (_, api):
            ids = {
                (await create_endpoint(api, receiver, name, ["lag.test"]))["id"]: name
                for name in ENDPOINTS
            }
            names = {name: endpoint_id for endpoint_id, name in ids.items()}

            async def ready() -> bool:
                return (await api.call("GET", "/readyz", key=None))[0] == 200

            await wait_for(ready)
            statuses: Counter[int] = Counter()
            accepted: list[str] = []
            watch, stop = Watch(), asyncio.Event()
            observing = asyncio.create_task(_observe(api, watch, stop))
            await _produce(api, statuses, accepted)

            async def all_taken() -> bool:
                return all(
                    receiver.taken[(name, event_id)] for name in ENDPOINTS for event_id in accepted
                )

            await wait_for(all_taken, timeout=60)
            stop.set()
            await observing
            assert statuses == Counter({202: RATE * SECONDS}), statuses
            assert all(r.verified for r in receiver.received)

            samples = watch.samples
            backlogs = [s.backlog for s in samples]
            assert backlogs[-1] > backlogs[0] and backlogs == sorted(backlogs), backlogs
            assert samples[-1].lag >= SECONDS - 2, [s.lag for s in samples]
            assert {s.ready for s in samples} == {200}
            assert "lagging" in {s.log_state for s in samples}

            records = await store.xlen(keys.outbox(0))
            memory = int(await store.memory_usage(keys.outbox(0), samples=0) or 0)
            info: dict[str, Any] = await store.xinfo_stream(keys.outbox(0))
            kinds = await _record_sizes(store)
            sends = len(receiver.received)
            print(
                f"\nlog away {samples[-1].at:.0f} s: "
                f"{len(accepted)} events x {len(ENDPOINTS)} endpoints, {sends} sends, all "
                f"delivered; outbox {records} records ({records / len(accepted):.2f} per "
                f"event), {memory / 1024 / 1024:.1f} MiB ({memory / records:.0f} B a record, "
                f"{memory / len(accepted):.0f} B an event; {info['radix-tree-nodes']} radix "
                f"nodes), lag {samples[-1].lag:.1f} s, /readyz 200 throughout; fields by "
                f"kind: {', '.join(f'{k} {n} x {b:.0f} B' for k, (n, b) in kinds.items())}"
            )

            # The log back: the scheduler again, its shipper on the stack's SQLite.
            stack.terminate("scheduler")
            back = time.monotonic()
            stack.start("scheduler")

            async def shipped() -> bool:
                return await store.xlen(keys.outbox(0)) == 0

            await wait_for(shipped, timeout=120)
            took = time.monotonic() - back
            print(
                f"backlog of {records} records shipped {took:.1f} s after the scheduler's "
                f"restart ({records / took:.0f} records/s, start-up included)"
            )
            status, verdict, _ = await api.call("GET", "/readyz", key=None)
            assert (status, verdict["checks"]["log"]["state"]) == (200, "ok"), verdict

        seen = Counter((names[r.endpoint], r.webhook_id) for r in receiver.received)
        events, attempts = _logged(stack, set(accepted))
        assert events == Counter({event_id: 1 for event_id in accepted})
        assert attempts == seen
    finally:
        await store.aclose()
        await receiver.stop()
        stack.stop()
