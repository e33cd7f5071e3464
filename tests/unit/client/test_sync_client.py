"""WebhookClient (urllib) against a scripted stub HTTP server on a loopback socket."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal

import orjson
import pytest

from webhook_service.client import (
    Backoff,
    IdempotencyKeyReused,
    InvalidEvent,
    ServerError,
    TransportError,
    WebhookClient,
)

# (status, headers, body); "drop" closes the connection without answering.
Answer = tuple[int, dict[str, str], bytes] | Literal["drop"]


@dataclass
class Stub:
    answers: list[Answer] = field(default_factory=list)
    seen: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    url: str = ""


@pytest.fixture
def stub() -> Iterator[Stub]:
    script = Stub()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            script.seen.append((dict(self.headers), body))
            script.paths.append(self.path)
            answer = script.answers.pop(0)
            if answer == "drop":
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            status, headers, payload = answer
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    script.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield script
    server.shutdown()
    server.server_close()


ACCEPTED = (202, {"Content-Type": "application/json"}, b'{"id": "msg_7", "deliveries": 0}')


def client(stub: Stub, sleeps: list[float], backoff: Backoff | None = None) -> WebhookClient:
    return WebhookClient(stub.url, "key-9", timeout=2.0, backoff=backoff, sleep=sleeps.append)


def test_send_posts_the_event_and_returns_its_id(stub: Stub) -> None:
    stub.answers = [ACCEPTED]
    assert client(stub, []).send("default", "order.created", {"id": 7}) == "msg_7"
    ((headers, body),) = stub.seen
    assert orjson.loads(body) == {"type": "order.created", "data": {"id": 7}}
    assert headers["Authorization"] == "Bearer key-9"
    assert headers["Content-Type"] == "application/json"
    assert stub.paths == ["/v1/applications/default/events"]


def test_a_dropped_connection_and_a_503_are_retried_with_the_same_key(stub: Stub) -> None:
    sleeps: list[float] = []
    stub.answers = ["drop", (503, {"Retry-After": "2"}, b"{}"), ACCEPTED]
    assert (
        client(stub, sleeps).send("default", "order.created", {}, idempotency_key="o-1") == "msg_7"
    )
    assert [h["Idempotency-Key"] for h, _ in stub.seen] == ["o-1"] * 3
    assert len(sleeps) == 2 and sleeps[1] >= 2.0


def test_a_reused_key_is_a_typed_error(stub: Stub) -> None:
    problem = orjson.dumps(
        {
            "type": "https://webhook-service.dev/problems/idempotency-key-reused",
            "title": "Validation failed",
            "status": 422,
            "detail": "other body",
            "instance": "/v1/applications/default/events",
        }
    )
    stub.answers = [(422, {"Content-Type": "application/problem+json"}, problem)]
    with pytest.raises(IdempotencyKeyReused) as raised:
        client(stub, []).send("default", "order.created", {}, idempotency_key="o-1")
    assert raised.value.problem.detail == "other body"
    assert len(stub.seen) == 1


def test_a_5xx_outlasting_every_try_is_a_server_error(stub: Stub) -> None:
    sleeps: list[float] = []
    stub.answers = [(502, {}, b"bad gateway")] * 2
    with pytest.raises(ServerError) as raised:
        client(stub, sleeps, backoff=Backoff(max_attempts=2)).send("default", "a", {})
    assert (raised.value.status, raised.value.problem.detail) == (502, "bad gateway")
    assert len(sleeps) == 1


def test_nobody_listening_is_a_transport_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    sleeps: list[float] = []
    closed = WebhookClient(
        f"http://127.0.0.1:{port}", "k", backoff=Backoff(max_attempts=3), sleep=sleeps.append
    )
    with pytest.raises(TransportError):
        closed.send("default", "a", {})
    assert len(sleeps) == 2


def test_a_hung_service_times_out_and_is_retried(stub: Stub) -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    try:
        port = silent.getsockname()[1]
        hung = WebhookClient(
            f"http://127.0.0.1:{port}",
            "k",
            timeout=0.2,
            backoff=Backoff(max_attempts=2),
            sleep=lambda _: None,
        )
        with pytest.raises(TransportError) as raised:
            hung.send("default", "a", {})
        assert isinstance(raised.value.__cause__, TimeoutError)
    finally:
        silent.close()


def test_an_application_id_channels_and_the_name_to_create_it_with(stub: Stub) -> None:
    stub.answers = [ACCEPTED, ACCEPTED]
    sender = client(stub, [])
    sender.send("app_01JABC", "order.created", {}, channels=("eu", "vip"))
    sender.send("../x", "order.created", {}, create_as="Shop 日本")
    assert stub.paths == [
        "/v1/applications/app_01JABC/events",
        "/v1/applications/..%2Fx/events",
    ]
    first, second = (orjson.loads(body) for _, body in stub.seen)
    assert first == {"type": "order.created", "data": {}, "channels": ["eu", "vip"]}
    assert second == {"type": "order.created", "data": {}, "application": {"name": "Shop 日本"}}


def test_a_missing_application_is_refused_at_once(stub: Stub) -> None:
    sleeps: list[float] = []
    problem = orjson.dumps(
        {
            "type": "https://webhook-service.dev/problems/not-found",
            "title": "Not found",
            "status": 404,
            "detail": "No application has this id or uid.",
        }
    )
    stub.answers = [(404, {"Content-Type": "application/problem+json"}, problem)]
    with pytest.raises(InvalidEvent) as raised:
        client(stub, sleeps).send("..", "order.created", {}, idempotency_key="o-2")
    assert raised.value.status == 404
    assert stub.paths == ["/v1/applications/%2E%2E/events"] and sleeps == []
