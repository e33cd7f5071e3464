"""WEBHOOK_LOG_FORMAT=json: the worker and scheduler processes write JSON lines, a delivery's
lines carry its ids, and no configured secret reaches a log file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
