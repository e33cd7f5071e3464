"""The shipper under its own faults, on a real stack (Valkey, a worker, scheduler processes
with their shippers, the API, a receiver verifying every signature), on each log backend:

1. the scheduler stopped while 2 000 events are delivered, so the outbox is large;
2. a scheduler started, and killed with SIGKILL as soon as its shipper has committed its
   first batch: the next batch is being read or written;
3. started again; once it ships, frozen (SIGSTOP) past its lock while a second scheduler
   takes the lock over and ships, with more events coming; then thawed (SIGCONT): it writes
   the batch it held, which the other may have written already. Two shippers at once.

At the end the log is complete: every attempt the receiver saw is in SQL exactly once, every
event is there, and the outbox is empty.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable, Iterator

import pytest
import redis
import sqlalchemy as sa

from tests.integration.conftest import Api, create_endpoint, send_event
from tests.support.log_check import wait_log_complete
from tests.support.postgres import log_env
from tests.support.receiver import Receiver
from tests.support.stack import Stack, settings_of, start_stack
from webhook_service.history import tables
from webhook_service.history.database import sync_engine
from webhook_service.history.shipper import LOCK_SECONDS
from webhook_service.store import keys

pytestmark = pytest.mark.chaos

EVENTS = 2000
MORE_EVENTS = 300
TYPE = "shipper.fault"
ENDPOINT = "shipped"


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def stack(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Stack]:
    running = start_stack(
        tmp_path_factory.mktemp("shipper-faults"),
        {
            # Batches small enough that shipping the backlog takes a few of them.
            "WEBHOOK_LOG_BATCH_SIZE": "500",
            "WEBHOOK_WORKER_CONCURRENCY": "2",
            **log_env(request, request.param),
        },
        scheduler=False,
    )
    yield running
    running.stop()


async def _send(api: Api, count: int, accepted: list[str]) -> None:
    sem = asyncio.Semaphore(32)

    async def one(n: int) -> None:
        async with sem:
            accepted.append(await send_event(api, TYPE, {"n": n}))

    await asyncio.gather(*(one(n) for n in range(count)))


async def _until(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {timeout}s"
        await asyncio.sleep(0.005)


def _rows(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(sa.select(sa.func.count()).select_from(tables.attempts)).scalar_one()
        )


async def test_the_log_is_complete_after_kills_and_two_shippers(
    stack: Stack, api: Api, receiver: Receiver
) -> None:
    receiver.behaviours[ENDPOINT] = lambda _name, n: 500 if n % 5 == 0 else 200
    endpoint = await create_endpoint(api, receiver, ENDPOINT, [TYPE])
    client = redis.Redis.from_url(stack.valkey.url, decode_responses=True)
    engine = sync_engine(settings_of(stack.env))
    started = time.monotonic()
    notes: list[str] = []

    def note(line: str) -> None:
        notes.append(
            f"{time.monotonic() - started:5.1f}s {line} (outbox {client.xlen(keys.outbox(0))}, "
            f"attempt rows {_rows(engine)})"
        )

    def outbox() -> int:
        return int(client.xlen(keys.outbox(0)))

    try:
        # 1. No scheduler: the API's wake-ups still reach the worker (the retries wait for
        # a scheduler), and the outbox only grows.
        accepted: list[str] = []
        await _send(api, EVENTS, accepted)
        await _until(
            lambda: len({r.webhook_id for r in receiver.received}) == EVENTS, "first tries", 60
        )
        # Each event, and at least one attempt of it: a worker records an attempt a moment
        # after its receiver has the request (CI once read 3 993 of 4 000 at once).
        await _until(lambda: outbox() >= 2 * EVENTS, "each event and its first attempt")
        note(f"{EVENTS} events tried once, no scheduler")
        backlog = outbox()

        # 2. kill -9 right after the first batch was committed and trimmed.
        stack.start("scheduler", "scheduler-a")
        await _until(lambda: outbox() < backlog, "the first batch")
        stack.kill("scheduler-a")
        note("scheduler-a SIGKILL after its first batch")

        # 3. Back; once it ships again (its dead self's lock expired), frozen past the lock.
        stack.start("scheduler", "scheduler-a")
        left = outbox()
        await _until(lambda: outbox() < left, "shipping after the kill", LOCK_SECONDS + 20)
        frozen = stack.processes["scheduler-a"].pid
        os.killpg(frozen, signal.SIGSTOP)
        note("scheduler-a SIGSTOP while shipping")
        try:
            stack.start("scheduler", "scheduler-b")
            await _send(api, MORE_EVENTS, accepted)
            await asyncio.sleep(LOCK_SECONDS + 2)
            note("scheduler-b has had the lock")
        finally:
            os.killpg(frozen, signal.SIGCONT)
        note("scheduler-a SIGCONT: two shippers")

        state = await wait_log_complete(
            engine, stack.valkey.url, receiver, {ENDPOINT: endpoint["id"]}, accepted, 60
        )
        note("log complete")
    finally:
        engine.dispose()
        client.close()
    assert all(r.verified for r in receiver.received)
    assert state.events == EVENTS + MORE_EVENTS and state.doubled == 0
    print(
        f"\nshipper faults ({stack.env.get('WEBHOOK_LOG_URL', 'sqlite')[:10]}): "
        f"{state.events} events, {sum(state.logged.values())} attempts, each in SQL once"
    )
    for line in notes:
        print("  " + line)
