"""The log's PostgreSQL away, under load, on a real stack (Valkey, a worker, the scheduler
with its shipper, the API, a receiver verifying every signature):

1. PostgreSQL stopped (``pg_ctl stop -m immediate``: as a crash) for 30 s while events keep
   coming: every event is answered 202 and delivered meanwhile; the outbox holds the log;
2. back: the backlog ships, nothing missing, nothing doubled;
3. a write refused by SQL (``REVOKE INSERT ON attempts`` from the role the service logs in
   as), then allowed again: the same end state.

The server is this module's own, not the session's: stopping it touches no other test.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
import redis
from sqlalchemy.engine import make_url

from tests.integration.conftest import Api, create_endpoint, send_event
from tests.support.log_check import wait_log_complete
from tests.support.postgres import Postgres, require_binaries, start_postgres
from tests.support.receiver import Receiver
from tests.support.stack import Stack, settings_of, start_stack
from webhook_service.history.database import sync_engine
from webhook_service.store import keys

pytestmark = pytest.mark.chaos

TYPE = "log.outage"
ENDPOINT = "through-outage"
RATE = 25.0  # events a second
OUTAGE_SECONDS = 30.0
# An event sent this close to the outage's end may still be on its retries then.
SETTLE_SECONDS = 3.0


@pytest.fixture(scope="module")
def server() -> Iterator[Postgres]:
    require_binaries()
    running = start_postgres()
    yield running
    running.destroy()


@pytest.fixture(scope="module")
def role(server: Postgres) -> str:
    return server.create_role()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, server: Postgres, role: str) -> Iterator[Stack]:
    running = start_stack(
        tmp_path_factory.mktemp("log-outage"),
        {"WEBHOOK_LOG_URL": server.create_database(owner=role), "WEBHOOK_LOG_TIMEOUT": "2"},
    )
    yield running
    running.stop()


class Load:
    """Events at ``RATE`` a second, each checked 202 (send_event asserts it), until stopped."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.sent: list[tuple[float, str]] = []  # (monotonic time, event id)
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        started = time.monotonic()
        n = 0
        while not self._stop.is_set():
            at = time.monotonic()
            self.sent.append((at, await send_event(self.api, TYPE, {"n": n})))
            n += 1
            await asyncio.sleep(max(0.0, started + n / RATE - time.monotonic()))

    async def stop(self) -> list[str]:
        self._stop.set()
        await self._task
        return [event for _, event in self.sent]

    def between(self, since: float, until: float) -> set[str]:
        return {event for at, event in self.sent if since <= at < until}


async def test_the_log_ships_whole_after_an_outage_and_a_refusal(
    stack: Stack, server: Postgres, role: str, api: Api, receiver: Receiver
) -> None:
    receiver.behaviours[ENDPOINT] = lambda _name, n: 500 if n % 4 == 0 else 200
    endpoint = await create_endpoint(api, receiver, ENDPOINT, [TYPE])
    endpoints = {ENDPOINT: endpoint["id"]}
    settings = settings_of(stack.env)
    engine = sync_engine(settings)
    database = make_url(settings.log_url.get_secret_value() if settings.log_url else "").database
    assert database
    client = redis.Redis.from_url(stack.valkey.url, decode_responses=True)
    notes: list[str] = []
    started = time.monotonic()

    def note(line: str) -> None:
        notes.append(
            f"{time.monotonic() - started:5.1f}s {line} (outbox {client.xlen(keys.outbox(0))})"
        )

    def delivered() -> set[str]:
        return {event for (_, event) in receiver.taken}

    try:
        load = Load(api)
        await asyncio.sleep(3)

        # 1. Down 30 s: ingest and delivery go on.
        server.stop("immediate")
        down = time.monotonic()
        note("PostgreSQL stopped")
        await asyncio.sleep(OUTAGE_SECONDS)
        during = load.between(down, time.monotonic() - SETTLE_SECONDS)
        missing = during - delivered()
        backlog = int(client.xlen(keys.outbox(0)))
        note(f"{len(during)} events sent while down, {len(missing)} not delivered")
        # A failed delivery (four 500s in a row) is delivered too: tried to its end.
        tried = {r.webhook_id for r in receiver.received}
        assert not (during - tried), "events sent during the outage were not delivered"
        assert backlog > len(during), "the outbox should hold the outage's records"

        # 2. Back: the backlog ships.
        server.start()
        note("PostgreSQL back")
        await asyncio.sleep(3)
        accepted = await load.stop()
        first = await wait_log_complete(engine, stack.valkey.url, receiver, endpoints, accepted)
        note(f"log complete: {first.events} events, {sum(first.logged.values())} attempts")

        # 3. Attempts refused by SQL a while, then allowed again.
        server.execute(f'REVOKE INSERT ON attempts FROM "{role}"', database)
        note("INSERT on attempts revoked")
        load = Load(api)
        await asyncio.sleep(6)
        held = int(client.xlen(keys.outbox(0)))
        note("still refused")
        assert held > RATE * 3, "the refused records should stay in the outbox"
        server.execute(f'GRANT INSERT ON attempts TO "{role}"', database)
        note("INSERT granted again")
        accepted += await load.stop()
        state = await wait_log_complete(engine, stack.valkey.url, receiver, endpoints, accepted)
        note(f"log complete: {state.events} events, {sum(state.logged.values())} attempts")
    finally:
        engine.dispose()
        client.close()
    assert all(r.verified for r in receiver.received)
    assert state.doubled == 0 and state.events == len(accepted)
    log = (stack.directory / "scheduler.log").read_text()
    assert "refused a batch (OperationalError" in log
    assert "refused a batch (ProgrammingError" in log
    print(f"\nlog outage: {len(accepted)} events, all in SQL once")
    for line in notes:
        print("  " + line)
