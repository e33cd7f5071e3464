"""WEBHOOK_LOG_FORMAT=json: the worker and scheduler processes write JSON lines, a delivery's
lines carry its ids, and no configured secret reaches a log file; the API writes an access
log only when WEBHOOK_ACCESS_LOG asks for one."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from tests.integration.conftest import Api, create_endpoint, send_event, wait_for
from tests.support.receiver import Receiver
from tests.support.stack import ADMIN_KEY, Stack, start_stack


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    running = start_stack(tmp_path_factory.mktemp("stack"), {"WEBHOOK_LOG_FORMAT": "json"})
    yield running
    running.stop()


def _json_lines(path: Path) -> list[dict[str, Any]]:
    lines = []
    for raw in path.read_bytes().splitlines():
        # Celery prints its start-up banner on stdout before logging takes over.
        if raw.startswith(b"{"):
            lines.append(orjson.loads(raw))
    return lines


async def test_worker_lines_are_json_with_the_ids(
    api: Api, receiver: Receiver, stack: Stack
) -> None:
    endpoint = await create_endpoint(api, receiver, "logged", ["logs.json"])
    event_id = await send_event(api, "logs.json", {"n": 1})

    def recorded() -> list[dict[str, Any]]:
        lines = _json_lines(stack.directory / "worker0.log")
        return [line for line in lines if line.get("event_id") == event_id]

    async def written() -> bool:
        return bool(recorded())

    await wait_for(written)
    (line,) = recorded()
    assert line["role"] == "worker" and line["level"] == "INFO"
    assert line["endpoint_id"] == endpoint["id"] and line["delivery_id"].startswith("dlv_")
    assert line["time"].endswith("Z") and line["status"] == "succeeded"

    scheduler = _json_lines(stack.directory / "scheduler.log")
    assert any(s["role"] == "scheduler" and s["message"] == "scheduler running" for s in scheduler)
    secrets = [ADMIN_KEY, stack.env["WEBHOOK_MASTER_KEY"]]
    for name in ("worker0.log", "scheduler.log"):
        text = (stack.directory / name).read_text()
        assert not [s for s in secrets if s in text], name


def _api_process(stack: Stack, name: str, env: dict[str, str]) -> str:
    """An API process of the stack's, on a port of its own: its base URL, once it answers."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    stack.start("api", name, {"WEBHOOK_HOST": "127.0.0.1", "WEBHOOK_PORT": str(port), **env})
    return f"http://127.0.0.1:{port}"


async def _get_until_up(url: str) -> None:
    async def up() -> bool:
        try:
            async with aiohttp.ClientSession() as session, session.get(url) as response:
                return response.status == 200
        except aiohttp.ClientError:
            return False

    await wait_for(up, timeout=60)


async def test_access_log_only_when_asked_for(stack: Stack) -> None:
    def access_lines(name: str) -> list[dict[str, Any]]:
        lines = _json_lines(stack.directory / f"{name}.log")
        return [line for line in lines if line["logger"] == "aiohttp.access"]

    quiet = _api_process(stack, "api-quiet", {})
    logged = _api_process(stack, "api-logged", {"WEBHOOK_ACCESS_LOG": "true"})
    try:
        # The quiet one first: by the time the other's line is written (after its answer
        # went out), the quiet one has had as long to write one.
        for base in (quiet, logged):
            await _get_until_up(f"{base}/healthz")

        async def written() -> bool:
            return bool(access_lines("api-logged"))

        await wait_for(written)
    finally:
        stack.kill("api-quiet")
        stack.kill("api-logged")
    assert access_lines("api-quiet") == []
    (line, *_) = access_lines("api-logged")
    assert "GET /healthz" in line["message"] and line["role"] == "api"
