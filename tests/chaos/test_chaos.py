"""Nothing lost under faults, with real processes (the promise of issue 4, measured).

500 events fan out to 3 endpoints. The receivers fail 30 % of requests and hang on 5 %.
Meanwhile workers are killed with SIGKILL (and restarted) again and again, one of two
schedulers is killed for good, and Valkey itself is killed with SIGKILL and restarted on
its AOF. Every delivery must end `succeeded`; duplicates are allowed (at-least-once) but
must carry the same `webhook-id`, and are counted and printed.

`make chaos` runs this alone; the figures go in docs/reliability.md.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest
import sqlalchemy as sa
from aiohttp.test_utils import TestServer

from tests.integration.conftest import settings_for
from tests.support.api_app import api_app
from tests.support.receiver import Receiver, flaky
from tests.support.restarts import kill_and_restart
from tests.support.stack import ADMIN_KEY, VALKEY, Stack, start_stack
from webhook_service.history import tables
from webhook_service.history.database import sync_engine

pytestmark = pytest.mark.chaos

EVENTS = 500
ENDPOINTS = ("alpha", "beta", "gamma")
FAIL_RATE = 0.30
HANG_RATE = 0.05
AUTH = {"Authorization": f"Bearer {ADMIN_KEY}"}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    running = start_stack(
        tmp_path_factory.mktemp("chaos"),
        extra={
            # 202 only once the event is on disk: Valkey is killed with SIGKILL below.
            "WEBHOOK_DURABILITY": "strict",
            # Enough attempts that a 35 % failure rate never spends a schedule (0.35^16).
            "WEBHOOK_RETRY_SCHEDULE": "0,0.5,0.5,1,1,1,1,1,1,1,1,1,1,1,1,1",
            "WEBHOOK_REQUEST_TIMEOUT": "2",
            "WEBHOOK_WAKEUP_GRACE": "2",
        },
        workers=2,
        scheduler=False,
    )
    running.start("scheduler", "scheduler-a")
    running.start("scheduler", "scheduler-b")
    yield running
    running.stop()


@pytest.fixture
async def base_url(stack: Stack) -> AsyncIterator[str]:
    server = TestServer(await api_app(settings_for(stack)), host="127.0.0.1")
    await server.start_server()
    yield str(server.make_url("")).rstrip("/")
    await server.close()


async def _post(
    session: aiohttp.ClientSession, url: str, body: dict[str, Any], idempotency_key: str = ""
) -> dict[str, Any]:
    """Like a careful producer (and webhook_service.client): the same idempotency key until
    the service says yes."""
    headers = AUTH | ({"Idempotency-Key": idempotency_key} if idempotency_key else {})
    while True:
        try:
            async with session.post(url, json=body, headers=headers) as answer:
                if answer.status in (201, 202):
                    created: dict[str, Any] = await answer.json()
                    return created
                # 503: the store is down; 409: our own earlier try of this key is still
                # in flight (strict mode, cut short by the crash). Both say: retry.
                assert answer.status in (409, 503), await answer.text()
        except aiohttp.ClientError:
            pass  # a dropped connection is retried like a 503
        await asyncio.sleep(0.2)


async def _produce(session: aiohttp.ClientSession, base: str, accepted: list[str]) -> None:
    for n in range(EVENTS):
        body = {"type": "chaos.tick", "data": {"n": n}}
        reply = await _post(session, f"{base}/v1/events", body, f"chaos-{n}")
        accepted.append(str(reply["id"]))
        await asyncio.sleep(0.02)


async def _faults(stack: Stack, log: list[str]) -> None:
    """Kill a worker three times, a scheduler once, and Valkey once, while events flow."""
    plan = [
        (2.0, "worker0"),
        (4.0, "scheduler-a"),
        (6.0, "worker1"),
        (8.0, VALKEY),
        (12.0, "worker0"),
        (16.0, "worker1"),
    ]
    started = time.monotonic()
    for at, victim in plan:
        await asyncio.sleep(max(0.0, started + at - time.monotonic()))
        log.append(f"{time.monotonic() - started:5.1f}s SIGKILL {victim}")
        if victim.startswith("scheduler"):
            stack.kill(victim)  # for good: the other scheduler takes the lock over
            continue
        await asyncio.to_thread(kill_and_restart, stack, victim, 2.0)
        log.append(f"{time.monotonic() - started:5.1f}s {victim} back")


def _statuses(engine: sa.Engine, accepted: list[str]) -> Counter[str]:
    """Every delivery of the accepted events by its status, as the delivery log has it: a
    delivery still in flight there is pending, or not in the log yet."""
    d = tables.deliveries.c
    with engine.connect() as conn:
        rows = conn.execute(
            sa.select(d.status, sa.func.count()).where(d.event_id.in_(accepted)).group_by(d.status)
        ).all()
    return Counter({status: count for status, count in rows})


async def test_nothing_is_lost_under_kills_failures_and_hangs(stack: Stack, base_url: str) -> None:
    rng = random.Random(20261129)
    receiver = Receiver()
    await receiver.start()
    faults: list[str] = []
    accepted: list[str] = []
    started = time.monotonic()
    try:
        async with aiohttp.ClientSession() as session:
            for name in ENDPOINTS:
                receiver.behaviours[name] = flaky(rng, FAIL_RATE, HANG_RATE)
                created = await _post(
                    session, f"{base_url}/v1/endpoints", {"url": receiver.url(name)}
                )
                receiver.secrets[name] = [str(created["secret"])]
            await asyncio.gather(_produce(session, base_url, accepted), _faults(stack, faults))
        expected = EVENTS * len(ENDPOINTS)
        deadline = time.monotonic() + 150
        engine = sync_engine(settings_for(stack))
        try:
            while _statuses(engine, accepted)["succeeded"] < expected:
                assert time.monotonic() < deadline, "deliveries still unfinished after 150 s"
                await asyncio.sleep(0.5)
            statuses = _statuses(engine, accepted)
        finally:
            engine.dispose()
        failed, pending = statuses["failed"], statuses["pending"]
    finally:
        await receiver.stop()
    elapsed = time.monotonic() - started

    assert len(set(accepted)) == EVENTS
    assert (failed, pending) == (0, 0)
    took = receiver.taken
    # Every event reached every endpoint with a verified signature, under its own id ...
    assert set(took) == {(e, i) for e in ENDPOINTS for i in accepted}
    assert all(r.verified for r in receiver.received)
    for r in receiver.received:
        assert r.webhook_id in accepted
        assert json.loads(r.body)["type"] == "chaos.tick"
    # ... and a duplicate is the same event again, never a different id for it.
    duplicates = sum(count - 1 for count in took.values())
    attempts = Counter("hang" if r.status is None else r.status for r in receiver.received)
    print(
        f"\nchaos: {EVENTS} events x {len(ENDPOINTS)} endpoints = {expected} deliveries, "
        f"all succeeded in {elapsed:.0f} s; duplicates {duplicates} "
        f"({duplicates / expected:.2%}); requests {sum(attempts.values())} "
        f"(200: {attempts[200]}, 500: {attempts[500]}, hung: {attempts['hang']})"
    )
    for line in faults:
        print("  " + line)
