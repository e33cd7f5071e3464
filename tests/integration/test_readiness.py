"""GET /readyz against a real stack: ready, then each way of not being ready (this module has
its own stack, whose workers, scheduler and server settings it breaks on purpose)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import redis
from aiohttp.test_utils import TestServer

from tests.integration.conftest import Api, serve_api, settings_for, wait_for
from tests.support.api_app import api_app
from tests.support.log_away import start_shipless_scheduler
from tests.support.replies import members
from tests.support.stack import Stack
from webhook_service.api.context import SERVICES
from webhook_service.store import keys
from webhook_service.store.liveness import HEARTBEAT_MAX_AGE_MS
from webhook_service.timeutil import now_ms

CHECKS = {"redis", "aof", "noeviction", "worker_heartbeat", "scheduler", "log"}


@pytest.fixture
async def public(stack: Stack) -> AsyncIterator[Api]:
    # A tight scheduler bound, so a stopped scheduler shows within seconds.
    settings = settings_for(stack).model_copy(update={"scheduler_max_lag": 2.0})
    server = TestServer(await api_app(settings), host="127.0.0.1")
    await server.start_server()
    async with aiohttp.ClientSession() as session:
        yield Api(session, str(server.make_url("")).rstrip("/"))
    await server.close()


async def _ready(api: Api) -> tuple[int, dict[str, Any]]:
    status, body, _ = await api.call("GET", "/readyz", key=None)
    return status, body


async def _failing(api: Api) -> set[str]:
    status, body = await _ready(api)
    assert set(body["checks"]) == CHECKS
    failing = {name for name, check in body["checks"].items() if not check["ok"]}
    assert (status == 200) == (not failing) == (body["status"] == "ready")
    return failing


async def test_ready_then_each_failure_named(public: Api, stack: Stack) -> None:
    async def ready() -> bool:
        return not await _failing(public)

    await wait_for(ready)
    status, body = await _ready(public)
    assert status == 200 and all(check["detail"] for check in body["checks"].values())

    client = redis.Redis.from_url(stack.valkey.url, decode_responses=True)
    client.config_set("appendonly", "no")
    client.config_set("maxmemory-policy", "allkeys-lru")
    try:
        assert await _failing(public) == {"aof", "noeviction"}
    finally:
        client.config_set("appendonly", "yes")
        client.config_set("maxmemory-policy", "noeviction")
    assert await _failing(public) == set()

    stack.kill("scheduler")

    async def scheduler_late() -> bool:
        return await _failing(public) == {"scheduler"}

    await wait_for(scheduler_late)
    stack.start("scheduler")
    await wait_for(ready)

    # A worker gone quiet: stop it, and age its last beat past the bound.
    stack.kill("worker0")
    stale = now_ms() - HEARTBEAT_MAX_AGE_MS - 1000
    for worker in members(client.zrange(keys.HEARTBEATS, 0, -1)):
        client.zadd(keys.HEARTBEATS, {worker: stale})
    status, body = await _ready(public)
    assert status == 503 and await _failing(public) == {"worker_heartbeat"}
    assert "ago" in body["checks"]["worker_heartbeat"]["detail"]
    stack.start("worker", "worker0")
    await wait_for(ready)


async def test_unreachable_redis_fails_every_check(stack: Stack) -> None:
    app = await api_app(settings_for(stack))
    pool = app[SERVICES].redis.connection_pool
    pool.connection_kwargs.update(host="127.0.0.1", port=1)
    await pool.disconnect()  # connections made while building go; new ones find nobody
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as session:
            down = Api(session, str(server.make_url("")).rstrip("/"))
            status, body = await _ready(down)
            assert (status, body["status"]) == (503, "unready")
            assert {name for name, c in body["checks"].items() if not c["ok"]} == CHECKS
    finally:
        await server.close()


async def _send(api: Api) -> int:
    """An event no endpoint takes: one outbox record."""
    status, _, _ = await api.call("POST", "/v1/events", json={"type": "ready.t", "data": {}})
    return status


async def test_a_lagging_log_is_named_and_only_a_full_backlog_fails(stack: Stack) -> None:
    """The log's database away: the outbox ages (lagging, still ready: events are taken),
    then fills (unready: ingest refuses); the log back, both clear."""
    settings = settings_for(stack).model_copy(update={"log_max_lag": 1.0, "log_backlog_max": 20})
    async with serve_api(settings) as (_, api):

        async def log_state(expected: str) -> bool:
            _, body = await _ready(api)
            state: str = body["checks"]["log"]["state"]
            return state == expected

        await wait_for(lambda: log_state("ok"))
        stack.terminate("scheduler")
        start_shipless_scheduler(stack)
        try:
            assert await _send(api) == 202
            await wait_for(lambda: log_state("lagging"))
            status, body = await _ready(api)
            assert (status, body["status"], await _failing(api)) == (200, "ready", set())
            assert "the oldest" in body["checks"]["log"]["detail"]

            # A cap of 20: the last of 21 is refused at the latest.
            assert 503 in [await _send(api) for _ in range(21)]
            status, body = await _ready(api)
            assert (status, await _failing(api)) == (503, {"log"})
            assert body["checks"]["log"]["state"] == "failing"
            assert "new events are refused" in body["checks"]["log"]["detail"]
        finally:
            stack.terminate("scheduler")
            stack.start("scheduler")
        await wait_for(lambda: log_state("ok"))
        assert (await _ready(api))[0] == 200
