"""Tick mode: Valkey and the API only, no worker and no scheduler; POST /v1/cron/tick alone
delivers everything, through receiver failures and retries, and never sends anything twice.
The API is configured as the README says, WEBHOOK_MODE=tick and the cron secret and no other
tick variable: a first attempt goes out with the first tick after its event, and /readyz is
ready without a worker or a scheduler."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
import redis
import sqlalchemy as sa
from aiohttp.test_utils import TestServer
from openapi_core import OpenAPI
from pydantic import SecretStr

from tests.integration.conftest import (
    Api,
    create_endpoint,
    delivery_statuses,
    send_event,
    settings_for,
)
from tests.integration.test_openapi import PROBLEMS, contract, spec_call, spec_doc
from tests.support.api_app import api_app
from tests.support.receiver import Receiver
from tests.support.stack import ADMIN_KEY, Stack, start_stack
from webhook_service.history import tables
from webhook_service.history.database import sync_engine
from webhook_service.history.retention import DAY_MS
from webhook_service.ids import id_time_ms
from webhook_service.store.keys import QUEUE_FRESH, QUEUE_RETRY, all_buckets, due
from webhook_service.timeutil import now_ms
from webhook_service.wiring import ConfigurationError

__all__ = ["contract", "spec_doc"]  # fixtures this module borrows from the contract tests

CRON_SECRET = "test-cron-secret-0123456789"
TICK = "/v1/cron/tick"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    running = start_stack(
        tmp_path_factory.mktemp("tick"),
        {"WEBHOOK_MODE": "tick", "WEBHOOK_CRON_SECRET": CRON_SECRET},
        workers=0,
        scheduler=False,
    )
    # The test stacks' short grace is no tick setting of ours: the mode's own is what runs.
    del running.env["WEBHOOK_WAKEUP_GRACE"]
    assert set(running.processes) == set()
    assert not {"WEBHOOK_WAKE_WORKERS", "WEBHOOK_WAKEUP_GRACE"} & set(running.env)
    yield running
    running.stop()


async def tick(api: Api, contract: OpenAPI, query: str = "", **kwargs: Any) -> Any:
    kwargs.setdefault("key", CRON_SECRET)
    return await spec_call(api, contract, "POST", TICK + query, **kwargs)


def attempts_of(receiver: Receiver, name: str) -> Counter[str]:
    return Counter(hook.webhook_id for hook in receiver.for_endpoint(name))


async def test_ticks_alone_deliver_everything_through_failures_and_retries(
    api: Api, receiver: Receiver, stack: Stack, contract: OpenAPI
) -> None:
    def fails_first_two(name: str, _n: int) -> int:
        current = receiver.for_endpoint(name)[-1].webhook_id
        return 503 if attempts_of(receiver, name)[current] <= 2 else 200

    receiver.behaviours["flaky"] = fails_first_two
    receiver.behaviours["dead"] = lambda _name, _n: 500
    endpoints = {
        name: (await create_endpoint(api, receiver, name, ["tick.order"]))["id"]
        for name in ("steady", "flaky", "dead")
    }
    events = []
    for n in range(5):
        status, accepted, _ = await api.call(
            "POST", "/v1/events", json={"type": "tick.order", "data": {"n": n}}
        )
        assert status == 202, accepted
        events.append(accepted["id"])

    totals: Counter[str] = Counter()
    final = {
        endpoints["steady"]: "succeeded",
        endpoints["flaky"]: "succeeded",
        endpoints["dead"]: "failed",
    }
    for _ in range(200):
        status, summary, _ = await tick(api, contract)
        assert status == 200, summary
        totals.update({k: v for k, v in summary.items() if k != "remaining"})
        settled = [await delivery_statuses(api, event_id) == final for event_id in events]
        if all(settled):
            break
        await asyncio.sleep(0.2)
    else:
        raise AssertionError(f"not settled by ticks: {totals}")

    # Four attempts in the test schedule: 'dead' is tried four times, 'flaky' three.
    assert attempts_of(receiver, "steady") == Counter({e: 1 for e in events})
    assert attempts_of(receiver, "flaky") == Counter({e: 3 for e in events})
    assert attempts_of(receiver, "dead") == Counter({e: 4 for e in events})
    assert all(hook.verified for hook in receiver.received)
    assert totals == Counter(delivered=10, failed=5, rescheduled=2 * 5 + 3 * 5)
    status, summary, _ = await tick(api, contract, "?limit=1000")
    assert (status, summary) == (
        200,
        {"delivered": 0, "failed": 0, "rescheduled": 0, "remaining": 0},
    )
    # Tick mode: the API published no Celery message, which nobody would consume.
    broker = redis.Redis.from_url(stack.valkey.url)
    try:
        assert broker.exists(QUEUE_FRESH, QUEUE_RETRY) == 0
    finally:
        broker.close()


def due_now(stack: Stack) -> int:
    client = redis.Redis.from_url(stack.valkey.url)
    try:
        now = int(time.time() * 1000)
        return sum(int(client.zcount(due(b), "-inf", now)) for b in all_buckets())
    finally:
        client.close()


async def test_a_tick_takes_at_most_its_limit(
    api: Api, receiver: Receiver, stack: Stack, contract: OpenAPI
) -> None:
    await create_endpoint(api, receiver, "bulk", ["tick.bulk"])
    for _ in range(5):
        status, _, _ = await api.call("POST", "/v1/events", json={"type": "tick.bulk", "data": {}})
        assert status == 202
    # Due at once: tick mode's grace is 0.
    assert await asyncio.to_thread(due_now, stack) == 5
    for delivered, remaining in ((2, 3), (2, 1), (1, 0)):
        status, summary, _ = await tick(api, contract, "?limit=2")
        assert status == 200
        assert summary == {
            "delivered": delivered,
            "failed": 0,
            "rescheduled": 0,
            "remaining": remaining,
        }
    assert len(receiver.for_endpoint("bulk")) == 5


async def test_the_first_tick_after_an_event_sends_it(
    api: Api, receiver: Receiver, contract: OpenAPI
) -> None:
    endpoint = await create_endpoint(api, receiver, "prompt", ["tick.prompt"])
    event_id = await send_event(api, "tick.prompt", {"n": 1})
    status, summary, _ = await tick(api, contract)
    assert (status, summary) == (
        200,
        {"delivered": 1, "failed": 0, "rescheduled": 0, "remaining": 0},
    )
    assert [hook.webhook_id for hook in receiver.for_endpoint("prompt")] == [event_id]
    assert await delivery_statuses(api, event_id) == {endpoint["id"]: "succeeded"}


async def _readyz(api: Api) -> tuple[int, dict[str, Any]]:
    status, body, _ = await api.call("GET", "/readyz", key=None)
    return status, body


async def test_ready_without_a_worker_or_a_scheduler(api: Api, stack: Stack) -> None:
    """No worker nor scheduler has ever run on this stack: ready in tick mode, and not in
    service mode, which the same API with WEBHOOK_MODE unset is."""
    status, body = await _readyz(api)
    assert (status, body["status"]) == (200, "ready"), body
    for name in ("worker_heartbeat", "scheduler"):
        assert body["checks"][name]["ok"] and "tick mode" in body["checks"][name]["detail"]

    service = settings_for(stack).model_copy(update={"mode": "service"})
    server = TestServer(await api_app(service), host="127.0.0.1")
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as session:
            status, body = await _readyz(Api(session, str(server.make_url("")).rstrip("/")))
    finally:
        await server.close()
    failing = {name for name, check in body["checks"].items() if not check["ok"]}
    assert (status, body["status"], failing) == (503, "unready", {"worker_heartbeat", "scheduler"})


async def test_a_tick_also_ships_the_log_and_keeps_its_retention(
    api: Api, receiver: Receiver, stack: Stack, contract: OpenAPI
) -> None:
    endpoint = await create_endpoint(api, receiver, "kept", ["tick.kept"])
    event_id = await send_event(api, "tick.kept", {})
    while await delivery_statuses(api, event_id) != {endpoint["id"]: "succeeded"}:
        assert (await tick(api, contract))[0] == 200
        await asyncio.sleep(0.2)
    engine = sync_engine(settings_for(stack))

    def logged() -> list[str]:
        with engine.connect() as conn:
            d = tables.deliveries.c
            return list(conn.execute(sa.select(d.status).where(d.event_id == event_id)).scalars())

    try:
        assert logged() == ["succeeded"]
        await asyncio.sleep(0.01)
        # A retention shorter than the event's age: the next tick deletes it from the log,
        # as the scheduler's shipper would.
        settings = settings_for(stack).model_copy(
            update={"retention_days": (now_ms() - id_time_ms(event_id)) / DAY_MS}
        )
        server = TestServer(await api_app(settings), host="127.0.0.1")
        await server.start_server()
        try:
            async with aiohttp.ClientSession() as session:
                short = Api(session, str(server.make_url("")).rstrip("/"))
                assert (await tick(short, contract))[0] == 200
        finally:
            await server.close()
        assert logged() == []
    finally:
        engine.dispose()


async def test_only_the_cron_secret_opens_the_route(api: Api, contract: OpenAPI) -> None:
    for kwargs in (
        {"key": None},
        {"key": "wrong-secret"},
        {"key": ADMIN_KEY},  # an API key, even the admin's, is not the cron secret
        {"key": None, "headers": {"Authorization": f"Basic {CRON_SECRET}"}},
        {"key": CRON_SECRET + "x"},
    ):
        status, problem, headers = await tick(api, contract, **kwargs)
        assert (status, problem["type"]) == (401, PROBLEMS + "unauthorized"), kwargs
        assert headers["WWW-Authenticate"].startswith("Bearer")
    for query in ("?limit=0", "?limit=1001", "?limit=ten"):
        status, problem, _ = await tick(api, contract, query)
        assert (status, problem["errors"][0]["pointer"]) == (422, "#/query/limit")


async def test_without_a_secret_the_route_is_not_there(stack: Stack, contract: OpenAPI) -> None:
    settings = settings_for(stack).model_copy(update={"cron_secret": None})
    server = TestServer(await api_app(settings), host="127.0.0.1")
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as session:
            off = Api(session, str(server.make_url("")).rstrip("/"))
            status, problem, _ = await tick(off, contract)
            assert (status, problem["type"]) == (404, PROBLEMS + "not-found")
    finally:
        await server.close()


async def test_a_short_secret_is_refused_at_start_up(stack: Stack) -> None:
    for weak in ("", "only-15-chars-x"):
        settings = settings_for(stack).model_copy(update={"cron_secret": SecretStr(weak)})
        server = TestServer(await api_app(settings), host="127.0.0.1")
        with pytest.raises(ConfigurationError, match="at least 16"):
            await server.start_server()
        await server.close()


async def test_two_ticks_at_once_one_waits_and_nothing_is_sent_twice(
    api: Api, receiver: Receiver, contract: OpenAPI
) -> None:
    # A receiver that holds the request keeps the first tick busy until the request timeout.
    receiver.hang.add("held")
    endpoint = await create_endpoint(api, receiver, "held", ["tick.held"])
    status, accepted, _ = await api.call(
        "POST", "/v1/events", json={"type": "tick.held", "data": {}}
    )
    assert status == 202
    first: asyncio.Task[Any] | None = None
    while not receiver.for_endpoint("held"):
        if first is None or first.done():
            # A tick that ended before the delivery came due; the next one will send it.
            assert first is None or (await first)[0] == 200
            first = asyncio.create_task(tick(api, contract))
        await asyncio.sleep(0.05)
    assert first is not None
    second_status, problem, headers = await tick(api, contract)
    assert (second_status, problem["type"]) == (409, PROBLEMS + "tick-in-progress")
    assert int(headers["Retry-After"]) > 0
    status, summary, _ = await first
    assert (status, summary["rescheduled"]) == (200, 1)  # the held request timed out

    receiver.hang.discard("held")
    while await delivery_statuses(api, accepted["id"]) != {endpoint["id"]: "succeeded"}:
        await asyncio.sleep(0.2)
        assert (await tick(api, contract))[0] == 200
    assert attempts_of(receiver, "held") == Counter({accepted["id"]: 2})
