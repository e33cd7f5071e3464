"""The API's answers counted by status code, added to Redis a batch at a time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

import redis.exceptions
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from redis.asyncio import Redis

from webhook_service.api.problems import ProblemError, problem_middleware
from webhook_service.api.response_counts import (
    RESPONSE_COUNTS,
    ResponseCounts,
    response_count_middleware,
)
from webhook_service.store import keys

INTERVAL = 0.05
METRICS = keys.metrics(keys.DEFAULT_BUCKET)


class FakeRedis:
    """What ``add_response_counts`` uses of a client: a MULTI of HINCRBYs."""

    def __init__(self) -> None:
        self.hashes: dict[str, dict[str, int]] = {}
        self.refuse = 0  # how many EXECs to refuse, as a full store does
        self.batches = 0

    @asynccontextmanager
    async def pipeline(self, transaction: bool) -> AsyncIterator[FakePipeline]:
        assert transaction
        yield FakePipeline(self)


class FakePipeline:
    def __init__(self, owner: FakeRedis) -> None:
        self._owner = owner
        self._queued: list[tuple[str, str, int]] = []

    def hincrby(self, key: str, name: str, amount: int) -> None:
        self._queued.append((key, name, amount))

    async def execute(self) -> list[Any]:
        if self._owner.refuse:
            self._owner.refuse -= 1
            raise redis.exceptions.ResponseError(
                "OOM command not allowed when used memory > 'maxmemory'."
            )
        for key, name, amount in self._queued:
            fields = self._owner.hashes.setdefault(key, {})
            fields[name] = fields.get(name, 0) + amount
        self._owner.batches += 1
        return [0] * len(self._queued)


async def _ok(request: web.Request) -> web.Response:
    return web.json_response({}, status=202)


async def _missing(request: web.Request) -> web.Response:
    raise ProblemError(404, "No such thing.")


async def _broken(request: web.Request) -> web.Response:
    raise RuntimeError("a bug")


async def _redirect(request: web.Request) -> web.Response:
    raise web.HTTPSeeOther("/ok")


def _app(store: FakeRedis) -> web.Application:
    app = web.Application(middlewares=[response_count_middleware, problem_middleware])
    app[RESPONSE_COUNTS] = ResponseCounts(cast(Redis, store), INTERVAL)
    app.router.add_post("/ok", _ok)
    app.router.add_get("/missing", _missing)
    app.router.add_get("/broken", _broken)
    app.router.add_get("/redirect", _redirect)
    app.router.add_get("/readyz", _missing)
    return app


async def _until(condition: Any, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "not within the deadline"
        await asyncio.sleep(0.01)


async def test_answers_counted_by_code_in_one_batch() -> None:
    store = FakeRedis()
    app = _app(store)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        for _ in range(3):
            assert (await client.post("/ok")).status == 202
        assert (await client.get("/missing")).status == 404
        assert (await client.get("/broken")).status == 500
        assert (await client.get("/redirect", allow_redirects=False)).status == 303
        assert (await client.get("/readyz")).status == 404  # a probe: not counted
        await _until(lambda: store.hashes.get(METRICS, {}).get("http:202") == 3)
        assert store.hashes[METRICS] == {"http:202": 3, "http:404": 1, "http:500": 1, "http:303": 1}
        assert store.batches == 1  # every answer within the interval: one MULTI


async def test_a_refused_batch_is_added_with_the_next() -> None:
    store = FakeRedis()
    store.refuse = 2
    app = _app(store)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        assert (await client.post("/ok")).status == 202
        await _until(lambda: store.refuse == 0)  # refused twice, tried again by itself
        assert (await client.post("/ok")).status == 202
        await _until(lambda: store.hashes.get(METRICS, {}).get("http:202") == 2)
        await app[RESPONSE_COUNTS].close()
        assert store.hashes[METRICS] == {"http:202": 2}  # neither lost nor added twice


async def test_close_adds_what_is_left() -> None:
    store = FakeRedis()
    counts = ResponseCounts(cast(Redis, store), interval=60)
    counts.note(503)
    counts.note(503)
    assert store.batches == 0
    await counts.close()
    assert store.hashes[METRICS] == {"http:503": 2}
