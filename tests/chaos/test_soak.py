"""The soak (issue 14, item 5): a steady load for a long time, with a part killed in turn.

50 events/s through two real API processes (our own client, alternating between them), each
fanned out to 3 endpoints whose receiver verifies every signature and fails 5 % of requests.
Every interval one part is killed with SIGKILL and started again: a worker, the scheduler,
an API process, Valkey (back on its AOF), in turn. Every 10 s the RSS of every process (a
prefork worker's whole process group) and Valkey's memory figures are sampled.

What must hold:
* nothing lost: every event answered 202 reaches every endpoint, its signature verified, and
  the producers meet nothing but 202 and 503 (problem+json, Retry-After) on the way;
* RSS: no process of ours grows more than 10 % from the end of its warm-up to its last
  sample;
* Redis memory comes back to its pre-load baseline once the backlog drains. Finished work
  leaves Redis within the run (once the log has it, after a hot window of 5 s; idempotency
  keys kept 15 s), so what the keys take must return to within 16 KiB of the baseline's:
  the few records the first event creates (counters, the wake-up record, each endpoint's
  last success). The
  endpoints' per-minute and per-hour stats are kept 2 h and 26 h by design, and are counted
  apart. ``used_memory`` in all is sampled and reported: it also grows with the connections
  the pools keep open (see tests/support/memory.py).

``--soak-seconds`` is the length of the load: 60 s in the normal suite (a kill every 12 s,
each of the four victims once); ``make soak`` runs 1800 (a kill every 120 s). The samples
go to ``soak.csv`` in the test's directory, whose path is printed with the figures;
docs/reliability.md has them.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import aiohttp
import pytest
import redis.asyncio

from tests.integration.conftest import Api, create_endpoint
from tests.support.api_process import api_url, stack_with_apis
from tests.support.memory import (
    CLIENTS,
    CLIENTS_MEMORY,
    KEYS_MEMORY,
    USED_MEMORY,
    Growth,
    Samples,
    keys_bytes,
    redis_figures,
    rss_growth,
)
from tests.support.producer import Answers, Production, produce
from tests.support.receiver import Receiver, flaky
from tests.support.restarts import kill_and_restart
from tests.support.stack import ADMIN_KEY, VALKEY, Stack
from webhook_service.client import AsyncWebhookClient, Backoff
from webhook_service.store import keys
from webhook_service.store.stats import HOUR_MS, MINUTE_MS
from webhook_service.timeutil import now_ms

pytestmark = pytest.mark.chaos

RATE = 50.0  # events per second
ENDPOINTS = ("one", "two", "three")
FAIL_RATE = 0.05
APIS = ("api-a", "api-b")
VICTIMS = ("worker0", "scheduler", "api-a", VALKEY)  # killed in this order, round and round
SAMPLE_EVERY = 10.0
RSS_GROWTH = 0.10
KEYS_LEFT = 16 * 1024  # bytes over the baseline once the load's work is let go
# Finished work is let go within the run. The idempotency keys outlive the slowest send
# (its retries reuse its key), ~6 s with these faults.
HOT_S = 5.0
IDEMPOTENCY_TTL_S = 15
# A producer that must not give up while a part is down (the default gives up after ~15 s).
PATIENT = Backoff(max_attempts=1000, base=0.2, cap=2.0, deadline=600.0)


@dataclass(frozen=True)
class Plan:
    seconds: float
    kill_every: float
    warm_up: float

    @classmethod
    def lasting(cls, seconds: float) -> Plan:
        return cls(seconds, min(120.0, seconds / 5), min(60.0, seconds / 5))

    def kills(self) -> list[tuple[float, str]]:
        """(seconds into the load, victim); none in the last half interval, so that the last
        victim is back before the load ends."""
        count = int((self.seconds - self.kill_every / 2) // self.kill_every)
        return [((n + 1) * self.kill_every, VICTIMS[n % len(VICTIMS)]) for n in range(count)]


@pytest.fixture
def plan(request: pytest.FixtureRequest) -> Plan:
    return Plan.lasting(float(request.config.getoption("soak_seconds", default=60.0)))


@pytest.fixture
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with stack_with_apis(
        tmp_path_factory.mktemp("soak"),
        extra={
            # 8 attempts: 5 % failures never spend them (0.05^8).
            "WEBHOOK_RETRY_SCHEDULE": "0,1,1,2,2,2,2,2",
            "WEBHOOK_HOT_SECONDS": str(HOT_S),
            "WEBHOOK_IDEMPOTENCY_TTL": str(IDEMPOTENCY_TTL_S),
        },
        workers=2,
        apis=APIS,
    ) as running:
        yield running


@pytest.fixture
async def redis_client(stack: Stack) -> AsyncIterator[redis.asyncio.Redis]:
    client = redis.asyncio.Redis.from_url(stack.valkey.url, socket_timeout=5)
    yield client
    await client.aclose()


async def sample_every(
    samples: Samples, stack: Stack, client: redis.asyncio.Redis, stop: asyncio.Event
) -> None:
    while not stop.is_set():
        figures = await redis_figures(client)
        await asyncio.to_thread(samples.take, stack, figures)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), SAMPLE_EVERY)


async def run_faults(stack: Stack, plan: Plan, log: list[str], restarted: list[str]) -> None:
    """Kill by the plan until the load's end (later, if a slow restart delayed the last kill).
    A part that dies by itself is started again, as a supervisor would, and noted: that
    fails the test."""
    began = time.monotonic()
    kills = plan.kills()
    while (now := time.monotonic() - began) < plan.seconds or kills:
        for name, process in dict(stack.processes).items():
            if process.poll() is not None:
                restarted.append(f"{now:6.0f}s {name} exited {process.returncode} by itself")
                await asyncio.to_thread(stack.relaunch, name)
        if kills and now >= kills[0][0]:
            _, victim = kills.pop(0)
            took = time.monotonic()
            await asyncio.to_thread(kill_and_restart, stack, victim)
            log.append(f"{now:6.0f}s SIGKILL {victim}, back in {time.monotonic() - took:.1f} s")
        await asyncio.sleep(1.0)


async def stats_series_bytes(
    client: redis.asyncio.Redis, endpoint_ids: list[str], since_ms: int, until_ms: int
) -> int:
    """What the endpoints' per-minute and per-hour stats of the run take: kept 2 h and 26 h
    by design (store/keys.py), so not the release's to let go."""
    names = [keys.endpoint_minute(e, m) for e in endpoint_ids
             for m in range(since_ms // MINUTE_MS, until_ms // MINUTE_MS + 1)]  # fmt: skip
    names += [keys.endpoint_hour(e, h) for e in endpoint_ids
              for h in range(since_ms // HOUR_MS, until_ms // HOUR_MS + 1)]  # fmt: skip
    async with client.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.memory_usage(name)
        return sum(size or 0 for size in await pipe.execute())


def all_taken(receiver: Receiver, accepted: list[str]) -> bool:
    return all(receiver.taken[(e, i)] for i in accepted for e in ENDPOINTS)


def report(
    samples: Samples, growths: list[Growth], production: Production, answers: Answers
) -> list[str]:
    lines = [
        f"accepted {len(production.accepted)} events, slowest send {production.slowest_send:.1f}"
        f" s; answers {dict(answers.statuses)}, retried failures {dict(answers.failures)}",
    ]
    for name in (USED_MEMORY, CLIENTS_MEMORY, KEYS_MEMORY, CLIENTS):
        idle, load, drain = (samples.of(name, phase) for phase in ("idle", "load", "drain"))
        lines.append(
            f"{name}: baseline {idle[-1]}, under load {min(load)}-{max(load)}, end {drain[-1]}"
        )
    lines.append("RSS KiB (part, pid: after its warm-up -> last, peak; sampled for):")
    lines += [
        f"  {g.part:10} {g.pid:7}: {g.warm_kib:7} -> {g.last_kib:7} ({g.ratio:+.1%}),"
        f" peak {g.peak_kib:7}; {g.lived:5.0f} s"
        for g in growths
    ]
    return lines


async def test_soak_rss_flat_redis_memory_back_nothing_lost(
    stack: Stack, plan: Plan, redis_client: redis.asyncio.Redis
) -> None:
    rng = random.Random(20261214)
    receiver = Receiver(keep=False)
    await receiver.start()
    urls = [api_url(stack, name) for name in APIS]
    samples, sampling = Samples(), asyncio.Event()
    production, answers = Production(), Answers()
    log: list[str] = []
    restarted: list[str] = []
    try:
        async with aiohttp.ClientSession() as session:
            api = Api(session, urls[0])
            endpoint_ids = []
            for name in ENDPOINTS:
                receiver.behaviours[name] = flaky(rng, FAIL_RATE)
                endpoint_ids.append((await create_endpoint(api, receiver, name))["id"])
        baseline = await keys_bytes(redis_client)
        sampler = asyncio.create_task(sample_every(samples, stack, redis_client, sampling))
        await asyncio.sleep(1.0)  # the idle baseline
        samples.phase, samples.began, began_ms = "load", time.monotonic(), now_ms()
        stop = asyncio.Event()
        async with aiohttp.ClientSession(trace_configs=[answers.trace()]) as session:
            clients = [
                AsyncWebhookClient(url, ADMIN_KEY, backoff=PATIENT, session=session) for url in urls
            ]
            producing = asyncio.create_task(produce(clients, RATE, stop, "soak.tick", production))
            await run_faults(stack, plan, log, restarted)
            stop.set()
            await producing
        samples.phase, stopped = "drain", time.monotonic()
        accepted = production.accepted
        # The slowest case: a delivery leased by a killed worker waits for its lease. What
        # is missing then is asserted below, once the figures are printed.
        while not all_taken(receiver, accepted) and time.monotonic() < stopped + 90:
            await asyncio.sleep(1.0)
        drained = time.monotonic() - stopped
        # The release from Redis and the idempotency keys' TTL let go of what is finished:
        # what is left once both have passed the last event. Asserted below, once the
        # figures are printed.
        settled = stopped + HOT_S + IDEMPOTENCY_TTL_S + 3
        while True:
            series = await stats_series_bytes(redis_client, endpoint_ids, began_ms, now_ms())
            left = await keys_bytes(redis_client) - series
            now = time.monotonic()
            if (now >= settled and left <= baseline + KEYS_LEFT) or now > settled + 60:
                break
            await asyncio.sleep(1.0)
        let_go = time.monotonic() - stopped
        sampling.set()
        await sampler
        samples.take(stack, await redis_figures(redis_client))
    finally:
        await receiver.stop()

    growths = rss_growth(samples, plan.warm_up)
    csv_path = stack.directory / "soak.csv"
    samples.write(csv_path)
    print(f"\nsoak: {plan.seconds:.0f} s at {RATE:.0f} events/s; samples in {csv_path}")
    for line in [
        *log,
        *restarted,
        *report(samples, growths, production, answers),
        f"after the load: delivered in {drained:.0f} s; {let_go:.0f} s after it the keys"
        f" took {left} B and the stats series {series} B (baseline {baseline} B)",
    ]:
        print("  " + line)

    assert production.errors == []
    assert len(set(accepted)) == len(accepted)
    missing = [(e, i) for i in accepted for e in ENDPOINTS if not receiver.taken[(e, i)]]
    assert missing == []
    # Nor any event the producers were not told about.
    assert {i for _, i in receiver.taken} == set(accepted)
    # 429: more of the key's requests in flight than WEBHOOK_KEY_CONCURRENCY, as they pile up
    # in an API process while the store is away on a loaded machine; shed with Retry-After
    # like a 503, and retried by the client.
    assert set(answers.statuses) <= {202, 429, 503}, answers.statuses
    assert answers.bad_refusals == []
    assert restarted == []
    assert all(g.ratio <= RSS_GROWTH for g in growths), growths
    assert left <= baseline + KEYS_LEFT
