"""Durability across restarts: Redis killed with SIGKILL, and `webhook-service up` itself."""

from __future__ import annotations

import http.server
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
import requests
from standardwebhooks.webhooks import Webhook

from tests.integration.conftest import Api, create_endpoint, delivery_statuses, wait_for
from tests.support.receiver import Receiver
from tests.support.stack import Stack
from webhook_service.embedded import free_port


async def test_event_survives_redis_kill_9(api: Api, receiver: Receiver, stack: Stack) -> None:
    receiver.behaviours["later"] = lambda _n, _i: 200
    endpoint = await create_endpoint(api, receiver, "later")
    # The worker is stopped, so the 202'd event can only be in Redis when Redis dies.
    stack.kill("worker0")
    status, accepted, _ = await api.call(
        "POST", "/v1/events", json={"type": "invoice.paid", "data": {"k": 9}}
    )
    assert status == 202
    time.sleep(1.5)  # appendfsync everysec: a crash of the server process alone loses nothing
    stack.restart_valkey()
    stack.start("worker", "worker0")

    async def delivered() -> bool:
        try:
            statuses = await delivery_statuses(api, accepted["id"])
        except AssertionError:
            return False
        return statuses == {endpoint["id"]: "succeeded"}

    await wait_for(delivered, timeout=60)
    assert {r.webhook_id for r in receiver.for_endpoint("later")} == {accepted["id"]}


async def test_api_answers_503_while_redis_is_down(api: Api, stack: Stack) -> None:
    stack.valkey.kill()
    try:
        started = time.monotonic()
        status, problem, headers = await api.call(
            "POST", "/v1/events", json={"type": "invoice.paid", "data": {}}
        )
        assert status == 503
        assert headers["Retry-After"]
        assert problem["status"] == 503
        assert time.monotonic() - started < 10
    finally:
        stack.restart_valkey()
    status, _, _ = await api.call("POST", "/v1/events", json={"type": "invoice.paid", "data": {}})
    assert status == 202


def _up(data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEBHOOK_")}
    env.update(
        {
            "WEBHOOK_DATA_DIR": str(data_dir),
            "WEBHOOK_PORT": str(port),
            "WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8",
        }
    )
    return subprocess.Popen(
        [sys.executable, "-m", "webhook_service", "up"],
        env=env,
        stdout=(data_dir.parent / "up.log").open("ab"),
        stderr=subprocess.STDOUT,
    )


def _wait_healthy(base: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, "up exited early"
        try:
            if requests.get(base + "/healthz", timeout=1).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.2)
    raise AssertionError("the API never answered")


@pytest.fixture
def up_dir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "data"


class Hook(http.server.BaseHTTPRequestHandler):
    """A plain receiver thread that verifies with the standardwebhooks package."""

    secret = ""
    verified: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Webhook(type(self).secret).verify(body, dict(self.headers))
        type(self).verified.append(self.headers["webhook-id"])
        self.send_response(204)
        self.end_headers()

    def log_message(self, *_: object) -> None:
        return None


@pytest.fixture
def hook() -> Iterator[Any]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Hook.verified = []
    yield SimpleNamespace(
        url=f"http://127.0.0.1:{server.server_address[1]}/hook",
        verified=Hook.verified,
    )
    server.shutdown()


def test_up_starts_serves_stops_and_keeps_its_data(up_dir: Path, hook: Any) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    process = _up(up_dir, port)
    try:
        _wait_healthy(base, process)
        admin = (up_dir / "admin.key").read_text().strip()
        assert oct((up_dir / "master.key").stat().st_mode & 0o777) == "0o600"
        assert oct(up_dir.stat().st_mode & 0o777) == "0o700"
        auth = {"Authorization": f"Bearer {admin}"}
        created = requests.post(
            base + "/v1/endpoints", json={"url": hook.url}, headers=auth, timeout=5
        )
        assert created.status_code == 201
        Hook.secret = created.json()["secret"]
        event = requests.post(
            base + "/v1/events", json={"type": "a.b", "data": {"x": 1}}, headers=auth, timeout=5
        )
        assert event.status_code == 202
        deadline = time.monotonic() + 30
        while not hook.verified and time.monotonic() < deadline:
            time.sleep(0.1)
        assert hook.verified == [event.json()["id"]]
        event_id = event.json()["id"]
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(60) == 0
    assert (up_dir / "valkey" / "appendonlydir").is_dir()

    process = _up(up_dir, port)
    try:
        _wait_healthy(base, process)
        again = requests.get(base + f"/v1/events/{event_id}", headers=auth, timeout=5)
        assert again.status_code == 200
        assert again.json()["type"] == "a.b"
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
