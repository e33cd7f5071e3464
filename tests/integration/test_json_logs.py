"""WEBHOOK_LOG_FORMAT=json: the worker and scheduler processes write JSON lines, a delivery's
lines carry its ids, and no configured secret reaches a log file; the API writes an access
log only when WEBHOOK_ACCESS_LOG asks for one, and a client's malformed requests are a few
INFO lines, never an error."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from yarl import URL

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


# Refused by aiohttp's parser before any of our code runs: a NUL in the target, and a
# Content-Length that is not a number.
BAD_REQUEST_LINE = b"GET /\x00 HTTP/1.1\r\nHost: x\r\n\r\n"
BAD_CONTENT_LENGTH = b"POST /v1/events HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n"
CLIENT_ERRORS = "webhook_service.api.client_errors"


async def _raw_status(port: int, request: bytes) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        answer = await asyncio.wait_for(reader.read(), 10)  # closed after an error
    finally:
        writer.close()
        await writer.wait_closed()
    return int(answer.split(b" ", 2)[1])


async def _malformed(base: str) -> list[int]:
    """A hundred requests a client got wrong: bad JSON, a body not in its Content-Encoding,
    a bad request line, a bad Content-Length. Each one's status."""
    statuses = []
    auth = {"Authorization": f"Bearer {ADMIN_KEY}", "Content-Type": "application/json"}
    gzip = {**auth, "Content-Encoding": "gzip"}
    async with aiohttp.ClientSession() as session:
        for body, headers, count in ((b"{bad", auth, 30), (b"not gzip", gzip, 20)):
            for _ in range(count):
                async with session.post(f"{base}/v1/events", data=body, headers=headers) as sent:
                    statuses.append(sent.status)
    port = URL(base).port
    assert port is not None
    for request in [BAD_REQUEST_LINE] * 25 + [BAD_CONTENT_LENGTH] * 25:
        statuses.append(await _raw_status(port, request))
    return statuses


async def _settled(log: Path, before: int) -> bool:
    # Three kinds, or anything worse: the line for a body aiohttp fails to read is written
    # after the answer has gone out.
    lines = _json_lines(log)[before:]
    return len(lines) >= 3 or any(line["level"] != "INFO" for line in lines)


async def test_malformed_requests_are_a_few_info_lines(stack: Stack) -> None:
    log = stack.directory / "api-malformed.log"
    base = _api_process(stack, "api-malformed", {})
    try:
        await _get_until_up(f"{base}/healthz")
        before = len(_json_lines(log))
        assert await _malformed(base) == [400] * 100
        await wait_for(lambda: _settled(log, before))
        await asyncio.sleep(0.5)  # time for a late line to show
    finally:
        stack.kill("api-malformed")
    lines = _json_lines(log)[before:]
    assert "Traceback" not in log.read_text()
    assert [(line["level"], "exc" in line) for line in lines] == [("INFO", False)] * len(lines)
    # One line per kind: the parser's two, and the undecodable body; the bad JSON is
    # answered and not logged.
    assert {line["logger"] for line in lines} == {CLIENT_ERRORS} and len(lines) == 3
    kinds = sorted(line["message"].split(" (")[0] for line in lines)
    assert kinds == [
        "client error 400 BadHttpMessage",
        "client error 400 ContentEncodingError",
        "client error 400 InvalidURLError",
    ]
