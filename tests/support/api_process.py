"""The API as operators run it, ``webhook-service api``: a process of the stack's own, on a
free port, for what only the real listener does (connection limits, timeouts, logs)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import requests

from tests.support.stack import Stack, start_stack
from webhook_service.embedded import free_port

_START_TIMEOUT = 60.0


def start_api(stack: Stack, name: str, env: Mapping[str, str] | None = None) -> tuple[str, int]:
    """Start it and wait until /healthz answers: its host and port."""
    port = free_port()
    stack.start(
        "api", name, {"WEBHOOK_HOST": "127.0.0.1", "WEBHOOK_PORT": str(port), **(env or {})}
    )
    wait_healthy(stack, name)
    return "127.0.0.1", port


def api_port(stack: Stack, name: str) -> int:
    """The port the API process ``name`` was (last) started on."""
    return int(stack.launches[name][1]["WEBHOOK_PORT"])


def api_url(stack: Stack, name: str) -> str:
    return f"http://127.0.0.1:{api_port(stack, name)}"


def wait_healthy(stack: Stack, name: str) -> None:
    """Wait until the API process ``name`` answers /healthz on its port."""
    url = f"{api_url(stack, name)}/healthz"
    deadline = time.monotonic() + _START_TIMEOUT
    while True:
        try:
            if requests.get(url, timeout=2).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        if stack.processes[name].poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"{name} did not come up; see {name}.log in {stack.directory}")
        time.sleep(0.1)


@contextmanager
def stack_with_apis(
    directory: Path, apis: Sequence[str], extra: Mapping[str, str], workers: int
) -> Iterator[Stack]:
    """A whole stack with API processes of its own (named ``apis``), stopped on the way out."""
    running = start_stack(directory, extra, workers=workers)
    try:
        for name in apis:
            start_api(running, name)
        yield running
    finally:
        running.stop()
