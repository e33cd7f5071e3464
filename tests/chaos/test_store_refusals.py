"""A store that refuses writes: Valkey at ``maxmemory``, and Valkey's AOF disk full.

Real processes: a Valkey with AOF, a Celery worker, the scheduler and an API process (with
the tick route on), and two signature-verifying receivers. A producer sends 2 500 events, 16
at a time, each once; meanwhile the history, one event, /metrics, the tick and two dashboard
pages are polled. While the store refuses, every answer must be a 202 (or 200 for a read)
or a 503 problem document with ``Retry-After``: never a 500, never a text/plain page. The
logs must hold no traceback and one WARNING per cause a minute at most. Once the store
takes writes again, every event answered 202 must reach both receivers within one lease
plus one wake-up grace, each attempt a receiver saw recorded exactly once.

The two faults differ in what goes on meanwhile. At ``maxmemory`` the store refuses new
work only: leases and records run (``allow-oom``), so sends answered during the fault are
recorded during it. A full AOF disk refuses every write: those records wait for its return.

The figures printed go in docs/reliability.md ("A store that refuses").
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis.asyncio

from tests.integration.conftest import Api, create_endpoint, settings_for, wait_for
from tests.support.api_process import start_api
from tests.support.receiver import Receiver
from tests.support.stack import Stack, start_stack
from tests.support.store_faults import (
    Answers,
    grow_tmpfs,
    poll,
    polled_routes,
    produce,
    read_log,
    sends_per_delivery,
    sign_in,
    tmpfs,
    undelivered,
)
from webhook_service.config import Settings
from webhook_service.store.refusals import Refusal

pytestmark = pytest.mark.chaos

EVENTS = 2500
CONCURRENCY = 16
ENDPOINTS = ("north", "south")
CRON_SECRET = "refusals-cron-secret-0123456789"
# Shorter than a lease (19 s here): a send whose record was refused still holds its lease
# when the store is back, so its attempt is recorded, not lost to a second sender.
HOLD_FAULT = 8.0
SETTINGS = {
    "WEBHOOK_ENDPOINT_CONCURRENCY": "40",
    "WEBHOOK_CRON_SECRET": CRON_SECRET,
}
# Answers slowly enough that sends are in flight when the store starts refusing, so some
# attempt records are refused after their POST.
RECEIVER_DELAY = 0.2
# Room left above what Valkey holds when the limit is first set: some hundreds of events
# more, halved every MARGIN_STEP_S until ingest is refused. The limit must close in well
# before the producer is done: on a fast machine the 2 500 events are all in within 4 s of
# the first (a step of 2 s once let them all in before any was refused).
MEMORY_MARGIN = 2 * 1024 * 1024
MARGIN_STEP_S = 0.2


@dataclass
class Run:
    stack: Stack
    settings: Settings
    base: str
    receiver: Receiver
    answers: Answers
    accepted: list[str] = field(default_factory=list)
    refusing: float = 0.0  # monotonic: the first refused ingest
    returned: float = 0.0  # monotonic: the store takes writes again
    returned_wall: float = 0.0  # the same, in Unix seconds


@asynccontextmanager
async def running(directory: Path) -> AsyncIterator[Run]:
    """The stack, an API process, the receivers and their endpoints; stopped afterwards."""
    stack = start_stack(directory, extra=SETTINGS)
    receiver = Receiver()
    await receiver.start()
    try:
        host, port = start_api(stack, "api")
        base = f"http://{host}:{port}"
        async with aiohttp.ClientSession() as session:
            api = Api(session, base)
            for name in ENDPOINTS:
                receiver.slow[name] = RECEIVER_DELAY
                await create_endpoint(api, receiver, name, ["refusal.test"])
        yield Run(stack, settings_for(stack), base, receiver, Answers())
    finally:
        await receiver.stop()
        stack.stop()


Step = Callable[[], Awaitable[None]]


async def under_fault(run: Run, begin: Step, refusing: Step, end: Step) -> None:
    """The load and the polling through a fault: ``begin`` starts it once some events are
    in, ``refusing`` runs once the store refuses, ``end`` ends the fault once the producer
    is done and the store has refused for HOLD_FAULT seconds."""
    jar = aiohttp.CookieJar(unsafe=True)
    async with aiohttp.ClientSession() as producer, aiohttp.ClientSession(cookie_jar=jar) as poller:
        await sign_in(poller, run.base)
        first = await produce(producer, run.base, 1, 1, run.answers)
        routes = polled_routes(CRON_SECRET, first[0])
        stop = asyncio.Event()
        polling = asyncio.create_task(poll(poller, run.base, routes, run.answers, stop))
        sending = asyncio.create_task(
            produce(producer, run.base, EVENTS - 1, CONCURRENCY, run.answers)
        )
        try:
            await wait_for(lambda: _ingested(run, accepted=True, at_least=200), 60, 0.02)
            await begin()
            await wait_for(lambda: _ingested(run, accepted=False, at_least=1), 60, 0.02)
            run.refusing = time.monotonic()
            await refusing()
            run.accepted = first + await sending
            await asyncio.sleep(max(0.0, run.refusing + HOLD_FAULT - time.monotonic()))
            await end()
            run.returned, run.returned_wall = time.monotonic(), time.time()
            await asyncio.sleep(2)  # the polling goes on while everything resumes
            stop.set()
            await polling
        finally:
            sending.cancel()
            polling.cancel()


async def _ingested(run: Run, *, accepted: bool, at_least: int) -> bool:
    """At least so many ingest answers were 202 (or were not)."""
    count = sum(
        n
        for (route, status), n in run.answers.codes.items()
        if route == "ingest" and (status == 202) == accepted
    )
    return count >= at_least


async def delivered_in_time(run: Run, *, records_wait: bool) -> None:
    """Every accepted event reaches both receivers, and is recorded succeeded, within a
    lease plus a grace of the store's return; each send is recorded exactly once. With
    ``records_wait``, some sends answered during the fault were recorded after it; without,
    some were recorded during it."""
    bound = run.settings.lease_seconds + run.settings.wakeup_grace
    deadline = run.returned + bound

    async def all_taken() -> bool:
        return not undelivered(run.receiver, ENDPOINTS, run.accepted)

    await wait_for(all_taken, timeout=max(1.0, deadline - time.monotonic()), every=0.2)
    last = max(r.at for r in run.receiver.received)
    records = await _records(run, deadline)
    recorded = time.monotonic()
    sent = sends_per_delivery(run.receiver)
    mismatched = [
        (*key, d["status"], d["attempts"], sent[key])
        for key, d in records.items()
        if (d["status"], d["attempts"]) != ("succeeded", sent[key])
    ]
    assert not mismatched, mismatched[:10]
    # Sent once and answered while the store refused: recorded after its return, or before.
    answered = {(r.endpoint, r.webhook_id): r.at + RECEIVER_DELAY for r in run.receiver.received}
    during = [
        datetime.fromisoformat(d["updated_at"]).timestamp() > run.returned_wall
        for key, d in records.items()
        if sent[key] == 1 and run.refusing < answered[key] < run.returned
    ]
    waited, went_on = sum(during), len(during) - sum(during)
    if records_wait:
        assert waited > 0, "no send had its record refused: the fault came at no send in flight"
    else:
        assert went_on > 0, "no send answered during the fault was recorded during it"
    print(
        f"delivered {len(run.accepted)} of {len(run.accepted)} accepted, the last "
        f"{last - run.returned:.1f} s after the store's return, all recorded "
        f"{recorded - run.returned:.1f} s after it (bound {bound:g} s); the store refused "
        f"for {run.returned - run.refusing:.1f} s; of the attempts answered meanwhile, "
        f"{went_on} were recorded during the fault and {waited} after it"
    )


async def _records(run: Run, deadline: float) -> dict[tuple[str, str], dict[str, Any]]:
    """Each accepted event's deliveries, by (endpoint name, event id), read until all are
    succeeded or the deadline has passed: an attempt's record may come a back-off after
    its receiver answered."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    waiting = set(run.accepted)
    async with aiohttp.ClientSession() as session:
        api = Api(session, run.base)
        _, page, _ = await api.call("GET", "/v1/endpoints?limit=10")
        names = {e["id"]: e["url"].rsplit("/", 1)[1] for e in page["data"]}
        while waiting:
            for event_id in list(waiting):
                status, event, _ = await api.call("GET", f"/v1/events/{event_id}")
                assert status == 200, event
                for delivery in event["deliveries"]:
                    found[(names[delivery["endpoint_id"]], event_id)] = delivery
                if all(d["status"] == "succeeded" for d in event["deliveries"]):
                    waiting.discard(event_id)
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
    return found


def check_answers(run: Run, cause_seen: str) -> None:
    answers = run.answers
    print(f"\nanswers: {answers.table()}")
    print(f"accepted {len(run.accepted)} of {EVENTS}; longest answer {answers.longest:.2f} s")
    assert not answers.wrong, answers.wrong
    assert answers.count("ingest", 503) > 0, f"the store never refused ({cause_seen})"


def check_logs(run: Run, cause: Refusal) -> None:
    """No traceback and no ERROR anywhere; each cause told at most once a minute by each
    process (a worker is its main process and its pool's), and the API's told at all."""
    processes = {"api": 1, "scheduler": 1, "worker0": run.settings.worker_concurrency + 1}
    for name, count in processes.items():
        found = read_log(run.stack.directory / f"{name}.log")
        print(f"{name}.log: {found}")
        assert found.tracebacks == 0, f"{name}.log holds a traceback"
        assert found.errors == 0, f"{name}.log holds an ERROR line"
        assert all(n <= count for n in found.refusal_warnings.values()), found
    api_log = read_log(run.stack.directory / "api.log")
    assert api_log.refusal_warnings[cause] == 1


async def test_valkey_at_maxmemory(tmp_path: Path) -> None:
    async with running(tmp_path) as run:
        store = redis.asyncio.Redis.from_url(run.stack.valkey.url)

        async def limit_near_use() -> None:
            # Finished work leaves Redis as the log takes it, so its use may stay flat under
            # the load: the limit closes in on it until ingest is refused.
            margin = MEMORY_MARGIN
            while not await _ingested(run, accepted=False, at_least=1):
                used = int((await store.info("memory"))["used_memory"])
                await store.config_set("maxmemory", used + margin)
                margin //= 2
                await asyncio.sleep(MARGIN_STEP_S)

        closing: list[asyncio.Task[None]] = []

        async def begin() -> None:
            closing.append(asyncio.create_task(limit_near_use()))

        async def below_use() -> None:
            # At the limit, finished deliveries free a little and ingest passes now and then;
            # below what it holds, no new event is taken until the limit is lifted.
            await closing[0]
            await store.config_set("maxmemory", 1)

        async def end() -> None:
            await store.config_set("maxmemory", 0)

        await under_fault(run, begin, below_use, end)
        await store.aclose()
        check_answers(run, "maxmemory")
        await delivered_in_time(run, records_wait=False)
        check_logs(run, Refusal.OUT_OF_MEMORY)


async def test_aof_disk_full(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "valkey", "6m") as disk:
        async with running(tmp_path) as run:

            async def by_itself() -> None:
                return None  # the AOF fills the disk, and it stays full

            async def grow() -> None:
                grow_tmpfs(disk, "256m")

            await under_fault(run, by_itself, by_itself, grow)
            check_answers(run, "a full disk")
            await delivered_in_time(run, records_wait=True)
            check_logs(run, Refusal.DISK_ERROR)
            await _survives_kill_9(run)


async def _survives_kill_9(run: Run) -> None:
    """Once the AOF is written again, a SIGKILL loses none of what was answered 202."""
    store = redis.asyncio.Redis.from_url(run.stack.valkey.url, decode_responses=True)

    async def written() -> bool:
        persistence = await store.info("persistence")
        return persistence["aof_last_write_status"] == "ok" and not persistence["aof_buffer_length"]

    await wait_for(written, timeout=10)
    await store.aclose()
    await asyncio.sleep(1.5)  # appendfsync everysec: the kernel has it; a process crash keeps it
    run.stack.restart_valkey()
    async with aiohttp.ClientSession() as session:
        api = Api(session, run.base)
        missing = []
        for event_id in run.accepted:
            status, event, _ = await _answered(api, f"/v1/events/{event_id}")
            if status != 200 or {d["status"] for d in event["deliveries"]} != {"succeeded"}:
                missing.append((event_id, status))
    assert not missing, missing[:10]


async def _answered(api: Api, path: str) -> tuple[int, Any, dict[str, str]]:
    """A read, tried again while the restarted server loads its AOF (503)."""
    for _ in range(50):
        status, body, headers = await api.call("GET", path)
        if status != 503:
            return status, body, headers
        await asyncio.sleep(0.2)
    return status, body, headers
