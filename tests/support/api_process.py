"""The API as operators run it, ``webhook-service api``: a process of the stack's own, on a
free port, for what only the real listener does (connection limits, timeouts, logs)."""

from __future__ import annotations

import time
from collections.abc import Mapping

import requests

from tests.support.stack import Stack
from webhook_service.embedded import free_port

_START_TIMEOUT = 60.0


def start_api(stack: Stack, name: str, env: Mapping[str, str] | None = None) -> tuple[str, int]:
    """Start it and wait until /healthz answers: its host and port."""
    port = free_port()
    stack.start(
        "api", name, {"WEBHOOK_HOST": "127.0.0.1", "WEBHOOK_PORT": str(port), **(env or {})}
    )
    deadline = time.monotonic() + _START_TIMEOUT
    while True:
        try:
            if requests.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return "127.0.0.1", port
        except requests.ConnectionError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{name} did not come up; see {name}.log in {stack.directory}")
        time.sleep(0.1)
