"""A rolling restart under load (issue 14, item 6): every process stopped with SIGTERM, as a
supervisor or a deploy stops it, and started again, one after the other, while producers
send through our own client.

Two API processes, two workers and the scheduler, each in turn. Producers alternate between
the two APIs with the client's default retry policy; one of three endpoints answers slowly,
so a worker always has sends in flight when it is told to stop. What must hold:
* the producers see no error at all: a connection refused while an API restarts is retried
  by the client (with the same Idempotency-Key), and every answer is a 202 or a 503
  (problem+json, Retry-After);
* nothing lost, nothing twice: every accepted event reaches every endpoint exactly once, in
  one request answered 200: no send is cut off by a stopping worker, none is repeated;
* each process exits 0 on SIGTERM; an API finishes the request in flight before it exits.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator

import aiohttp
import orjson
import pytest

from tests.integration.conftest import Api, create_endpoint, wait_for
from tests.support.api_process import api_port, api_url, stack_with_apis, wait_healthy
from tests.support.producer import Answers, Production, produce
from tests.support.raw_http import read_reply, request_head
from tests.support.receiver import Receiver
from tests.support.restarts import terminate_and_restart
from tests.support.stack import ADMIN_KEY, Stack
from webhook_service.client import AsyncWebhookClient

pytestmark = pytest.mark.chaos

APIS = ("api-a", "api-b")
ROLLING = (*APIS, "worker0", "worker1", "scheduler")
ENDPOINTS = ("fast", "also-fast", "slow")
SLOW_ANSWER = 1.0  # seconds: under the request timeout (3 s), within the worker's drain
RATE = 20.0  # events per second, over both APIs
BETWEEN = 3.0  # seconds of load before, between and after the restarts


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    # Room for the slow endpoint's sends: RATE x SLOW_ANSWER in flight at once.
    with stack_with_apis(
        tmp_path_factory.mktemp("rolling"),
        extra={"WEBHOOK_ENDPOINT_CONCURRENCY": "50"},
        workers=2,
        apis=APIS,
    ) as running:
        yield running


@pytest.fixture
async def endpoints(stack: Stack, receiver: Receiver) -> None:
    receiver.slow["slow"] = SLOW_ANSWER
    async with aiohttp.ClientSession() as session:
        api = Api(session, api_url(stack, "api-a"))
        for name in ENDPOINTS:
            await create_endpoint(api, receiver, name)


def taken_by_all(receiver: Receiver, event_ids: list[str]) -> bool:
    return all(receiver.taken[(e, i)] for i in event_ids for e in ENDPOINTS)


async def test_an_api_finishes_the_request_in_flight_when_told_to_stop(
    stack: Stack, receiver: Receiver, endpoints: None
) -> None:
    port = api_port(stack, "api-a")
    body = orjson.dumps({"type": "rolling.drain", "data": {"n": 1}})
    head = request_head(
        "POST",
        "/v1/events",
        {"Content-Type": "application/json", "Content-Length": str(len(body))},
    )
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        # The request is being read (its head and half its body are in) when SIGTERM comes.
        writer.write(head + body[: len(body) // 2])
        await writer.drain()
        await asyncio.sleep(0.5)
        process = stack.processes.pop("api-a")
        process.terminate()
        await asyncio.sleep(1.0)
        # Stopping, not stopped: new connections are refused, this one is still served.
        assert process.poll() is None
        with pytest.raises(ConnectionRefusedError):
            await asyncio.open_connection("127.0.0.1", port)
        writer.write(body[len(body) // 2 :])
        await writer.drain()
        reply = await read_reply(reader)
    finally:
        writer.close()
    assert reply.status == 202, reply.body
    assert await asyncio.to_thread(process.wait, 30) == 0

    event_id = str(orjson.loads(reply.body)["id"])

    async def delivered() -> bool:
        return taken_by_all(receiver, [event_id])

    await wait_for(delivered, timeout=60)
    stack.relaunch("api-a")
    await asyncio.to_thread(wait_healthy, stack, "api-a")


async def test_a_rolling_restart_under_load_loses_nothing_and_fails_no_producer(
    stack: Stack, receiver: Receiver, endpoints: None
) -> None:
    answers, production = Answers(), Production()
    restarts: list[str] = []
    exits: dict[str, int] = {}
    stop = asyncio.Event()
    async with aiohttp.ClientSession(trace_configs=[answers.trace()]) as session:
        clients = [
            AsyncWebhookClient(api_url(stack, name), ADMIN_KEY, session=session) for name in APIS
        ]
        producing = asyncio.create_task(produce(clients, RATE, stop, "rolling.tick", production))
        for name in ROLLING:
            await asyncio.sleep(BETWEEN)
            in_flight = receiver.in_flight.get("slow", 0)
            began = time.monotonic()
            exits[name] = await asyncio.to_thread(terminate_and_restart, stack, name)
            restarts.append(
                f"{name}: SIGTERM with {in_flight} slow sends in flight, exit {exits[name]},"
                f" back in {time.monotonic() - began:.1f} s"
            )
        await asyncio.sleep(BETWEEN)
        stop.set()
        await producing
    accepted = production.accepted

    async def delivered() -> bool:
        return taken_by_all(receiver, accepted)

    await wait_for(delivered, timeout=90)
    requests = Counter((r.endpoint, r.webhook_id) for r in receiver.received)
    print(
        f"\nrolling restart: {len(accepted)} events accepted, answers {dict(answers.statuses)},"
        f" retried failures {dict(answers.failures)}, slowest send"
        f" {production.slowest_send:.1f} s, {receiver.requests.total()} requests received"
    )
    for line in restarts:
        print("  " + line)

    assert production.errors == []
    assert set(answers.statuses) <= {202, 503}, answers.statuses
    assert answers.bad_refusals == []
    # The restarts were felt: the client met refused connections, and retried them.
    assert answers.failures.total() > 0
    assert exits == dict.fromkeys(ROLLING, 0)
    assert len(set(accepted)) == len(accepted)
    # Every event at every endpoint, each in one request answered 200; and no event that
    # the producers were not told about (a retry with another key would store one twice).
    assert set(requests) == {(e, i) for e in ENDPOINTS for i in accepted}
    assert set(requests.values()) == {1}
    assert all(r.status == 200 and r.verified for r in receiver.received)
