"""Network faults between our own parts: every wait is bounded, every part resumes by
itself, and nothing answered 202 is lost.

Each pair talks through a fault proxy of its own (tests/support/fault_proxy.py): the API
and Redis, the worker and Redis (its store client and its Celery broker, the same Valkey),
the scheduler and Redis, the worker and the receiver. Every event goes to two endpoints,
one of which fails each event's first request, so the scheduler's retries are always
needed too. For each pair and fault (blackhole, half-open, reset, 500 ms of latency each
way) producers send events during the fault and after it, and the test asserts:

* every answer is a 202, or a 503 problem+json with Retry-After;
* no request waits longer than the Redis timeouts allow, and no delivery attempt longer
  than the request timeout; a send that gets no answer ends at the request timeout and
  is retried;
* once the fault ends the parts resume by themselves, within a bound made of the
  configured timeouts: the API accepts, the scheduler passes, every event is delivered;
* every event answered 202 (the 503s sent again with their Idempotency-Key, as a careful
  producer does) reaches both endpoints, verified, with the data it was sent with, and
  is recorded as succeeded; no process died.

It prints a row of figures per case, and the table again at the end: the table in
docs/reliability.md ("Network faults between our own parts").
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
import redis.asyncio

from tests.integration.conftest import Api, settings_for, wait_for
from tests.support.api_process import start_api
from tests.support.fault_proxy import Fault, FaultProxy
from tests.support.logged import wait_logged
from tests.support.receiver import Behaviour, Receiver
from tests.support.stack import Stack, start_stack
from webhook_service.api.problems import CONTENT_TYPE as PROBLEM_CONTENT_TYPE
from webhook_service.config import Settings
from webhook_service.store import keys
from webhook_service.store.bucket_leases import oldest_pass
from workers.scheduler import lock_seconds

pytestmark = [pytest.mark.chaos, pytest.mark.asyncio(loop_scope="module")]

PAIRS = ("api-redis", "worker-redis", "scheduler-redis", "worker-receiver")
FAULTS = (Fault.BLACKHOLE, Fault.HALF_OPEN, Fault.RESET, Fault.LATENCY)
# Every event goes to both. The second answers 500 to an event's first request, so that
# every event also needs a retry, and with it the scheduler.
ENDPOINTS = ("net", "net_retried")
# Short timeouts, so that a fault outlasts every one of them and the file stays quick. The
# Redis socket timeout is above the 1 s round trip of the latency fault: slow, not down.
ENV = {
    "WEBHOOK_REQUEST_TIMEOUT": "2",
    "WEBHOOK_CONNECT_TIMEOUT": "1",
    "WEBHOOK_REDIS_CONNECT_TIMEOUT": "0.5",
    "WEBHOOK_REDIS_SOCKET_TIMEOUT": "2",
    "WEBHOOK_REDIS_HEALTH_CHECK_INTERVAL": "1",
    "WEBHOOK_REDIS_POOL_TIMEOUT": "0.5",
    "WEBHOOK_LEASE_MARGIN": "3",
    # Long enough in all (~20 s) that no delivery runs out of attempts during a fault.
    "WEBHOOK_RETRY_SCHEDULE": "0,0.5,1,2,4,4,4,4",
    "WEBHOOK_WAKEUP_GRACE": "2",
}
FAULT_S = 4.0
LATENCY_S = 0.5  # each way
PRODUCERS = 2
PAUSE_S = 0.2
AFTER_EVENTS = 3
# What a busy 2-core machine adds to any wait, on top of the configured timeouts.
MARGIN_S = 2.0
# The client waits far longer than any bound: a hang shows as a long stall, not an error.
CLIENT_TIMEOUT_S = 60.0
# A refused event is sent again for this long after the fault; a condition is waited for
# this long (the bounds asserted are far shorter: these only keep a failure from hanging).
SETTLE_S = 30.0
WAIT_S = 60.0


@dataclass
class Net:
    stack: Stack
    settings: Settings
    proxies: dict[str, FaultProxy]
    api_url: str


@dataclass
class Answer:
    key: str
    data: dict[str, Any]
    status: int | None  # None: no answer within CLIENT_TIMEOUT_S
    seconds: float
    replayed: bool = False  # a 202 replayed from an earlier try with the same key
    problem: str | None = None  # what was wrong with a refusal, if anything


@dataclass
class Case:
    name: str
    answers: list[Answer] = field(default_factory=list)
    accepted: dict[str, dict[str, Any]] = field(default_factory=dict)  # event id -> data


FIGURES: list[str] = []  # one row a case, printed again as a table at the end
HEADER = (
    "| pair | fault | answers during | longest request | longest attempt | API accepts "
    "after | delivered after | caught up | scheduler pass | delivered/accepted | replayed "
    "| duplicates |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
)


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Net]:
    stack = start_stack(tmp_path_factory.mktemp("net"), ENV, workers=0, scheduler=False)
    valkey = ("127.0.0.1", stack.valkey.port)
    proxies = {
        pair: FaultProxy(*valkey, latency=LATENCY_S).start()
        for pair in PAIRS
        if pair.endswith("redis")
    }
    try:
        for role, pair in (("worker", "worker-redis"), ("scheduler", "scheduler-redis")):
            stack.start(role, env={"WEBHOOK_REDIS_URL": proxies[pair].redirect(stack.valkey.url)})
        api_url = proxies["api-redis"].redirect(stack.valkey.url)
        host, port = start_api(stack, "api", {"WEBHOOK_REDIS_URL": api_url})
        yield Net(stack, settings_for(stack), proxies, f"http://{host}:{port}")
    finally:
        stack.stop()
        for proxy in proxies.values():
            proxy.close()
        print("\n" + "\n".join([HEADER, *FIGURES]))


def first_try_fails(receiver: Receiver) -> Behaviour:
    def answer(name: str, _: int) -> int:
        # The receiver keeps the request it is answering last in its list before it asks.
        event_id = receiver.received[-1].webhook_id
        tries = sum(1 for got in receiver.for_endpoint(name) if got.webhook_id == event_id)
        return 500 if tries == 1 else 200

    return answer


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def receiver(net: Net) -> AsyncIterator[Receiver]:
    running = Receiver()
    running.behaviours[ENDPOINTS[1]] = first_try_fails(running)
    await running.start()
    proxy = FaultProxy("127.0.0.1", running.port, latency=LATENCY_S).start()
    net.proxies["worker-receiver"] = proxy
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
        for name in ENDPOINTS:
            url = proxy.redirect(running.url(name))
            status, body, _ = await Api(session, net.api_url).call(
                "POST", "/v1/endpoints", json={"url": url}
            )
            assert status == 201, body
            running.secrets[name] = [body["secret"]]
    yield running
    await running.stop()
    proxy.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def api(net: Net) -> AsyncIterator[Api]:
    timeout = aiohttp.ClientTimeout(total=CLIENT_TIMEOUT_S)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        yield Api(session, net.api_url)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def valkey(net: Net) -> AsyncIterator[redis.asyncio.Redis]:
    """The test's own way into Valkey, around every proxy."""
    client = redis.asyncio.Redis.from_url(net.stack.valkey.url, decode_responses=True)
    yield client
    await client.aclose()


def api_stall_bound(settings: Settings, fault: Fault) -> float:
    """The longest a request may take when Redis does not answer: a free pooled connection,
    a new one made, and one reply that never comes (a timeout is never retried). When every
    reply comes, only late, a request is as slow as its round trips: at most a new
    connection's two (AUTH, then CLIENT SETINFO), a health-check PING and the ingest."""
    if fault is Fault.LATENCY:
        return 4 * 2 * LATENCY_S + MARGIN_S
    return (
        settings.redis_pool_timeout
        + settings.redis_connect_timeout
        + settings.redis_socket_timeout
        + MARGIN_S
    )


def scheduler_bound(settings: Settings) -> float:
    """A pass stuck on a dead connection gives up after the Redis timeouts; the scheduler
    then waits for its own lock, left behind, to expire."""
    return (
        settings.redis_connect_timeout
        + settings.redis_socket_timeout
        + lock_seconds(settings)
        + settings.scheduler_interval
        + MARGIN_S
    )


def resume_bound(settings: Settings) -> float:
    """How soon after a fault every accepted event is delivered, at worst: a dead Redis
    link is found (kombu drops a BRPOP overdue by its 1 s timeout plus the health-check
    interval, and looks that often, once its loop is through the commands it runs on the
    same dead link: the binding refresh, the heartbeat, the remote-control channel), the
    broker reconnects (kombu's step between tries grows by 2 s a try during the fault), a
    delivery leased on a lost reply waits out its lease for the scheduler, and a send on a
    dead receiver link times out and waits for its next attempt."""
    find = 1 + 2 * settings.redis_health_check_interval + 3 * settings.redis_socket_timeout
    reconnect = 2 + FAULT_S
    lease = settings.lease_seconds + settings.scheduler_interval
    send = settings.request_timeout + max(settings.retry_schedule) * (1 + settings.retry_jitter)
    return find + reconnect + lease + send + MARGIN_S


async def send(api: Api, case: Case, key: str, data: dict[str, Any]) -> Answer:
    started = time.monotonic()
    try:
        status, body, headers = await api.call(
            "POST",
            "/v1/events",
            json={"type": "net.probe", "data": data},
            headers={"Idempotency-Key": key},
        )
    except TimeoutError:
        answer = Answer(key, data, None, time.monotonic() - started)
    else:
        answer = Answer(key, data, status, time.monotonic() - started)
        if status == 202:
            answer.replayed = headers.get("Idempotent-Replayed") == "true"
            case.accepted[body["id"]] = data
        elif status == 503:
            problem = body if headers.get("Content-Type") == PROBLEM_CONTENT_TYPE else None
            if problem is None or problem.get("status") != 503 or "Retry-After" not in headers:
                answer.problem = f"not a 503 problem+json with Retry-After: {headers} {body}"
    case.answers.append(answer)
    return answer


async def produce(api: Api, case: Case, producer: int, stop: asyncio.Event) -> None:
    n = 0
    while not stop.is_set():
        n += 1
        key = f"{case.name}-{producer}-{n}"
        await send(api, case, key, {"case": case.name, "key": key})
        await asyncio.sleep(PAUSE_S)


async def until_accepted(api: Api, case: Case, key: str, data: dict[str, Any]) -> float:
    """Send with this key until the event is accepted (replayed, if an earlier try was
    stored and its answer lost); returns when it was, in monotonic seconds."""
    deadline = time.monotonic() + SETTLE_S
    while (await send(api, case, key, data)).status != 202:
        assert time.monotonic() < deadline, f"{key} still refused {SETTLE_S} s after the fault"
        await asyncio.sleep(0.25)
    return time.monotonic()


def taken(receiver: Receiver, case: Case) -> Counter[tuple[str, str]]:
    """How often each endpoint took (answered 200) each accepted event, verified, with the
    data it was sent with."""
    found: Counter[tuple[str, str]] = Counter()
    for got in receiver.received:
        data = case.accepted.get(got.webhook_id)
        if got.verified and got.status == 200 and data is not None:
            assert json.loads(got.body)["data"] == data, got.body
            found[(got.endpoint, got.webhook_id)] += 1
    return found


def delivered(receiver: Receiver, case: Case) -> set[str]:
    """The accepted events every endpoint took."""
    by_endpoint = taken(receiver, case)
    return {e for e in case.accepted if all((name, e) in by_endpoint for name in ENDPOINTS)}


async def seconds_until(condition: Callable[[], Awaitable[bool]], since: float) -> float:
    try:
        await wait_for(condition, timeout=WAIT_S)
    except AssertionError:
        raise AssertionError(f"{condition.__doc__} not within {WAIT_S} s of the fault") from None
    return time.monotonic() - since


async def attempt_logs(api: Api, event_ids: Iterable[str]) -> list[list[dict[str, Any]]]:
    """Every delivery's attempts, in order."""
    logs = []
    for event_id in event_ids:
        _, event, _ = await api.call("GET", f"/v1/events/{event_id}")
        for delivery in event["deliveries"]:
            _, detail, _ = await api.call("GET", f"/v1/deliveries/{delivery['id']}")
            logs.append(detail["attempt_log"])
    return logs


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("pair", PAIRS)
async def test_fault(
    net: Net,
    receiver: Receiver,
    api: Api,
    valkey: redis.asyncio.Redis,
    pair: str,
    fault: Fault,
) -> None:
    settings = net.settings
    case = Case(f"{pair}.{fault}".replace("-", "_"))

    net.proxies[pair].set(fault)
    stop = asyncio.Event()
    producers = [asyncio.create_task(produce(api, case, n, stop)) for n in range(PRODUCERS)]
    await asyncio.sleep(FAULT_S)
    net.proxies[pair].set(Fault.NONE)
    ended, ended_ms = time.monotonic(), int(time.time() * 1000)
    stop.set()
    await asyncio.gather(*producers)
    during = list(case.answers)

    # Fresh events first, to see how soon the parts work again; then the refused ones
    # again, with their keys.
    after = {f"{case.name}-after-{n}": {"case": case.name, "after": n} for n in range(AFTER_EVENTS)}
    accepted_at = [await until_accepted(api, case, key, data) for key, data in after.items()]
    for answer in during:
        if answer.status == 503:
            await until_accepted(api, case, answer.key, answer.data)
    after_ids = {event_id for event_id, data in case.accepted.items() if data in after.values()}

    async def after_delivered() -> bool:
        """The events sent after the fault delivered"""
        return after_ids <= delivered(receiver, case)

    recorded: set[str] = set()

    async def caught_up() -> bool:
        """Every accepted event taken by the receiver and recorded as such"""
        if not set(case.accepted) <= delivered(receiver, case):
            return False
        for event_id in set(case.accepted) - recorded:
            _, event, _ = await api.call("GET", f"/v1/events/{event_id}")
            if any(d["status"] != "succeeded" for d in event["deliveries"]):
                return False
            recorded.add(event_id)
        return True

    async def scheduler_passed() -> bool:
        """A scheduler pass over every bucket"""
        passed = oldest_pass(await valkey.hgetall(keys.SCHEDULER_PASSES))
        return passed is not None and passed > ended_ms

    delivered_s, caught_up_s, scheduler_s = await asyncio.gather(
        seconds_until(after_delivered, ended),
        seconds_until(caught_up, ended),
        seconds_until(scheduler_passed, ended),
    )
    api_s = accepted_at[0] - ended
    # Their states are Redis's at once, their attempts the log's once the shipper has them.
    await wait_logged(net.stack.valkey.url)
    logs = await attempt_logs(api, case.accepted) if pair == "worker-receiver" else []
    longest_request = max(a.seconds for a in case.answers)
    longest_attempt = max((a["duration_ms"] for log in logs for a in log), default=0) / 1000
    took = taken(receiver, case)
    codes = Counter(str(a.status) for a in during)
    FIGURES.append(
        f"| {pair} | {fault} | {_counts(codes)} | {longest_request:.2f} s | "
        f"{longest_attempt:.2f} s | {api_s:.1f} s | {delivered_s:.1f} s | {caught_up_s:.1f} s | "
        f"{scheduler_s:.1f} s | {len(delivered(receiver, case))}/{len(case.accepted)} | "
        f"{sum(a.replayed for a in case.answers)} | {sum(took.values()) - len(took)} |"
    )
    print(FIGURES[-1])

    assert all(a.status in (202, 503) and a.problem is None for a in case.answers), [
        (a.status, a.problem) for a in case.answers if a.status not in (202, 503) or a.problem
    ]
    assert longest_request <= api_stall_bound(settings, fault), longest_request
    assert longest_attempt <= settings.request_timeout + MARGIN_S, longest_attempt
    if pair == "worker-receiver" and fault in (Fault.BLACKHOLE, Fault.HALF_OPEN):
        # A send no answer comes back to ends at the request timeout, and is retried.
        timed_out = [log for log in logs if any(a["error"] == "timeout" for a in log)]
        assert timed_out, logs
        for log in timed_out:
            ends = [a["duration_ms"] / 1000 for a in log if a["error"] == "timeout"]
            assert min(ends) >= 0.9 * settings.request_timeout, log
            assert log[-1]["status_code"] == 200, log
    assert max(api_s, delivered_s, caught_up_s) <= resume_bound(settings)
    assert scheduler_s <= scheduler_bound(settings), scheduler_s
    assert delivered(receiver, case) == set(case.accepted)
    alive = {name: p.poll() for name, p in net.stack.processes.items()}
    assert all(code is None for code in alive.values()), alive


def _counts(codes: Counter[str]) -> str:
    return ", ".join(f"{code}: {n}" for code, n in sorted(codes.items()))
