"""Fixtures with real parts: a Valkey with AOF, Celery worker and scheduler processes, the
API served in-process on a real socket, a signature-verifying receiver, and the delivery
log on SQLite or on a PostgreSQL of the tests' own.

A module marked ``pytest.mark.both_logs`` runs whole against each log backend in turn: its
``log_backend`` (and so its module's ``stack``) is parametrized over ``LOG_BACKENDS``; any
other module runs on SQLite alone."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis
import sqlalchemy as sa
from aiohttp import web
from aiohttp.test_utils import TestServer
from redis.asyncio import Redis

from tests.support.api_app import api_app
from tests.support.postgres import log_env, postgres
from tests.support.receiver import Receiver
from tests.support.stack import ADMIN_KEY, Stack, settings_of, start_stack
from webhook_service.api.listener import runner_options
from webhook_service.config import Settings
from webhook_service.embedded import EmbeddedValkey, start_valkey
from webhook_service.history.database import sync_engine, upgrade
from webhook_service.ids import new_id
from webhook_service.store.endpoints import EndpointSaveArgs
from webhook_service.store.scripts import Scripts

pytestmark = pytest.mark.integration

__all__ = ["postgres"]  # the fixture, registered here for the integration tests

LOG_BACKENDS = ("sqlite", "postgresql")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "log_backend" in metafunc.fixturenames and metafunc.definition.get_closest_marker(
        "both_logs"
    ):
        # Module scope: one stack per backend, every test of the module on each.
        metafunc.parametrize("log_backend", LOG_BACKENDS, indirect=True, scope="module")


@pytest.fixture(scope="module")
def log_backend(request: pytest.FixtureRequest) -> str:
    backend: str = getattr(request, "param", "sqlite")
    return backend


@pytest.fixture
def sync_redis(valkey: EmbeddedValkey) -> Iterator[redis.Redis]:
    """A blocking client of the module's bare Valkey, as the shipper's thread has one."""
    made = redis.Redis.from_url(valkey.url, decode_responses=True)
    yield made
    made.close()


@pytest.fixture
def log_engine(
    tmp_path: Path, request: pytest.FixtureRequest, log_backend: str
) -> Iterator[sa.Engine]:
    """An empty log of the test's own on the module's backend, migrated, without a stack."""
    env = {"WEBHOOK_DATA_DIR": str(tmp_path), **log_env(request, log_backend)}
    made = sync_engine(settings_of(env))
    upgrade(made)
    yield made
    made.dispose()


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest, log_backend: str
) -> Iterator[Stack]:
    running = start_stack(tmp_path_factory.mktemp("stack"), log_env(request, log_backend))
    yield running
    running.stop()


@pytest.fixture(scope="module")
def valkey(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedValkey]:
    """A Valkey alone, for tests of one store component without the rest of the stack."""
    server = start_valkey(tmp_path_factory.mktemp("valkey"))
    yield server
    server.stop()


@pytest.fixture
def fresh_valkey(tmp_path: Path) -> Iterator[EmbeddedValkey]:
    """A Valkey of the test's own, for tests that stop it, read its AOF or need it empty."""
    server = start_valkey(tmp_path / "valkey")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def client(valkey: EmbeddedValkey) -> AsyncIterator[Redis]:
    """A client of the module's bare Valkey, emptied first: for tests of the scripts."""
    redis = Redis.from_url(valkey.url, decode_responses=True)
    await redis.flushall()
    yield redis
    await redis.aclose()


async def save_endpoint(scripts: Scripts, event_type: str, at: int) -> str:
    """A new endpoint subscribed to one type, straight through endpoint_save.lua."""
    endpoint_id = new_id("ep", at)
    fields: dict[str, str | int] = {
        "url": "http://127.0.0.1:9/x", "event_types": f'["{event_type}"]', "operations": "0",
        "disabled": "0", "created": at, "updated": at,
    }  # fmt: skip
    args = EndpointSaveArgs(endpoint_id, 0, fields)
    await scripts.run("endpoint_save", args.keys(), args.argv())
    return endpoint_id


def settings_for(stack: Stack) -> Settings:
    return settings_of(stack.env)


class Api:
    def __init__(self, session: aiohttp.ClientSession, base: str) -> None:
        self.session = session
        self.base = base
        self.created_endpoints: list[str] = []

    async def call(
        self, method: str, path: str, *, json: Any = None, headers: dict[str, str] | None = None,
        key: str | None = ADMIN_KEY, data: bytes | None = None,
    ) -> tuple[int, Any, dict[str, str]]:  # fmt: skip
        sent = {"Authorization": f"Bearer {key}"} if key else {}
        sent.update(headers or {})
        async with self.session.request(
            method, self.base + path, json=json, data=data, headers=sent
        ) as response:
            text = await response.text()
            body = await response.json(content_type=None) if text else None
            return response.status, body, dict(response.headers)


def app_server(app: web.Application, settings: Settings) -> TestServer:
    """The app on a real socket, with the connection handling the API process has."""
    return TestServer(app, host="127.0.0.1", **runner_options(settings))


@pytest.fixture
async def api(stack: Stack) -> AsyncIterator[Api]:
    settings = settings_for(stack)
    server = app_server(await api_app(settings), settings)
    await server.start_server()
    async with aiohttp.ClientSession() as session:
        client = Api(session, str(server.make_url("")).rstrip("/"))
        yield client
        # Endpoints outlive a test in the shared stack; one that takes every type would
        # otherwise receive the next test's events.
        for endpoint_id in client.created_endpoints:
            await client.call("DELETE", f"/v1/endpoints/{endpoint_id}")
    await server.close()


@asynccontextmanager
async def serve_api(settings: Settings) -> AsyncIterator[tuple[web.Application, Api]]:
    """One more API process, in-process on a real socket: for settings of its own, several
    processes on one store, or a look at the app's router."""
    app = await api_app(settings)
    server = app_server(app, settings)
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as session:
            yield app, Api(session, str(server.make_url("")).rstrip("/"))
    finally:
        await server.close()


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    running = Receiver()
    await running.start()
    yield running
    await running.stop()


async def wait_for(
    condition: Callable[[], Awaitable[bool]], timeout: float = 30.0, every: float = 0.1
) -> None:
    deadline = time.monotonic() + timeout
    while not await condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(every)


async def create_endpoint(
    api: Api, receiver: Receiver, name: str, event_types: list[str] | None = None
) -> dict[str, Any]:
    status, body, _ = await api.call(
        "POST", "/v1/endpoints", json={"url": receiver.url(name), "event_types": event_types}
    )
    assert status == 201, body
    receiver.secrets.setdefault(name, []).append(body["secret"])
    api.created_endpoints.append(body["id"])
    created: dict[str, Any] = body
    return created


async def send_event(api: Api, event_type: str, data: dict[str, Any]) -> str:
    status, body, _ = await api.call("POST", "/v1/events", json={"type": event_type, "data": data})
    assert status == 202, body
    event_id: str = body["id"]
    return event_id


async def delivery_statuses(api: Api, event_id: str) -> dict[str, str]:
    status, body, _ = await api.call("GET", f"/v1/events/{event_id}")
    assert status == 200, body
    return {d["endpoint_id"]: d["status"] for d in body["deliveries"]}


async def finished_job(api: Api, job_id: str) -> dict[str, Any]:
    """Wait for a background job (bulk retry, recovery) to finish; returns it."""

    async def done() -> bool:
        _, job, _ = await api.call("GET", f"/v1/jobs/{job_id}")
        state: str = job["state"]
        return state == "done"

    await wait_for(done)
    _, job, _ = await api.call("GET", f"/v1/jobs/{job_id}")
    finished: dict[str, Any] = job
    return finished
