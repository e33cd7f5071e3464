"""OpenTelemetry traces through the real stack: an API process, a worker and the scheduler
with the OTEL_* variables, exporting over OTLP/HTTP to a collector in the test, which
decodes what they send with opentelemetry-proto (tests/support/otlp.py).

One event with the producer's traceparent makes an ingest span (a child of it) and, per
endpoint, an attempt span with its lease, sign, send and record children, linked to the
producer's span; an endpoint with send_traceparent gets a traceparent header naming its
attempt span, the other none. Without the variables no log line carries a trace id and a
send_traceparent endpoint gets the producer's traceparent as it was sent; with
OTEL_TRACES_EXPORTER=none and the collector's address nothing reaches it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from tests.integration.conftest import Api
from tests.support.api_process import api_url, start_api
from tests.support.otlp import KIND_CLIENT, KIND_SERVER, Collector, Exported, otel_env
from tests.support.receiver import Received, Receiver
from tests.support.stack import Stack, start_stack

pytestmark = pytest.mark.integration

TRACE, SPAN = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
PRODUCER = f"00-{TRACE}-{SPAN}-01"
STEPS = ["lease", "record", "send", "sign"]
DEADLINE_S = 15.0


@pytest.fixture
async def collector() -> AsyncIterator[Collector]:
    running = Collector()
    await running.start()
    yield running
    await running.stop()


@asynccontextmanager
async def running_stack(directory: Path) -> AsyncIterator[Stack]:
    """Valkey and the scheduler, without the OTEL_* variables; the test starts the rest.
    Every process logs JSON lines to ``directory``/<name>.log. The blocking starts and stops
    run in a thread, so that the collector and the receiver on this loop answer meanwhile
    (each process exports what it still holds as it stops)."""
    extra = {"WEBHOOK_LOG_FORMAT": "json"}
    stack = await asyncio.to_thread(start_stack, directory, extra, 0)
    try:
        yield stack
    finally:
        await asyncio.to_thread(stack.stop)


@asynccontextmanager
async def api_of(stack: Stack, name: str) -> AsyncIterator[Api]:
    async with aiohttp.ClientSession() as session:
        yield Api(session, api_url(stack, name))


async def _endpoint(api: Api, receiver: Receiver, name: str, event_type: str, **fields: Any) -> str:
    status, body, _ = await api.call(
        "POST",
        "/v1/endpoints",
        json={"url": receiver.url(name), "event_types": [event_type], **fields},
    )
    assert status == 201, body
    receiver.secrets[name] = [body["secret"]]
    return str(body["id"])


async def _send(api: Api, path: str, event_type: str, traceparent: str | None) -> str:
    headers = {"traceparent": traceparent} if traceparent else None
    status, body, _ = await api.call(
        "POST", path, json={"type": event_type, "data": {"n": 1}}, headers=headers
    )
    assert status == 202, body
    return str(body["id"])


async def _until(what: str, found: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not found():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {DEADLINE_S} s: {what}")
        await asyncio.sleep(0.05)


def _attempts(collector: Collector, event_id: str) -> list[Exported]:
    return [
        s for s in collector.named("attempt") if s.attributes.get("webhook.event.id") == event_id
    ]


def _with_steps(collector: Collector, traced: Traced, count: int) -> bool:
    attempts = _attempts(collector, traced.event["id"]) + _attempts(collector, traced.nested_id)
    return len(attempts) == count and all(
        sorted(c.name for c in collector.children(a)) == STEPS for a in attempts
    )


def _header(received: Received, name: str) -> str | None:
    return {k.lower(): v for k, v in received.headers.items()}.get(name)


def _log_lines(directory: Path, name: str) -> Iterator[dict[str, Any]]:
    for line in (directory / f"{name}.log").read_text().splitlines():
        if line.startswith("{"):
            yield orjson.loads(line)


async def test_traces_on_with_the_variables_and_off_without(
    tmp_path: Path, collector: Collector, receiver: Receiver
) -> None:
    async with running_stack(tmp_path) as stack:
        # The worker holds its spans until it stops (a minute's batch delay): those below
        # are what it flushed on the way out.
        worker_env = {**otel_env(collector), "OTEL_BSP_SCHEDULE_DELAY": "60000"}
        stack.start("worker", "worker-traced", worker_env)
        # Two APIs without traces, for later: one without the variables, one with the
        # collector's address but OTEL_TRACES_EXPORTER=none, which keeps them off.
        none = {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint}
        apis = {"api-traced": otel_env(collector), "api": {}, "api-none": none}
        await asyncio.gather(
            *(asyncio.to_thread(start_api, stack, name, env) for name, env in apis.items())
        )
        async with api_of(stack, "api-traced") as api:
            traced = await _traced_events(api, collector, receiver)
        assert not collector.named("attempt")
        await asyncio.to_thread(stack.terminate, "worker-traced")
        await _until("the attempts' spans", lambda: _with_steps(collector, traced, 4))
        _check_traced(tmp_path, collector, receiver, traced)
        spans = len(collector.spans)

        # The same stack, its worker now without the variables.
        stack.start("worker", "worker")
        receiver.received.clear()
        await _untraced_events(stack, receiver)
    assert len(collector.spans) == spans, "exported with traces off"
    _check_untraced(tmp_path, receiver)


@dataclass(frozen=True)
class Traced:
    event: dict[str, Any]  # as GET /v1/events/{id} has it
    nested_id: str  # the second event's, sent through the nested route
    header_ep: str  # the endpoint with send_traceparent
    plain_ep: str


async def _traced_events(api: Api, collector: Collector, receiver: Receiver) -> Traced:
    """One event with the producer's traceparent to two endpoints (one asks for the header),
    then one through the nested route without; their ingest spans exported."""
    header_ep = await _endpoint(api, receiver, "header", "traced", send_traceparent=True)
    plain_ep = await _endpoint(api, receiver, "plain", "traced")
    event_id = await _send(api, "/v1/events", "traced", PRODUCER)
    _, event, _ = await api.call("GET", f"/v1/events/{event_id}")
    app = event["application"]
    nested_id = await _send(api, f"/v1/applications/{app}/events", "traced", None)
    await _until("four deliveries", lambda: len(receiver.received) == 4)
    await _until("the ingest spans", lambda: len(collector.named("POST /v1/events")) == 1)
    await _until("nested", lambda: bool(collector.named("POST /v1/applications/{app}/events")))
    return Traced(event, nested_id, header_ep, plain_ep)


def _check_traced(
    directory: Path, collector: Collector, receiver: Receiver, traced: Traced
) -> None:
    event, nested_id = traced.event, traced.nested_id
    event_id, app = event["id"], event["application"]
    header_ep, plain_ep = traced.header_ep, traced.plain_ep
    [ingest] = collector.named("POST /v1/events")
    assert ingest.kind == KIND_SERVER
    assert (ingest.trace_id, ingest.parent_span_id) == (TRACE, SPAN)  # the producer's child
    assert ingest.attributes == {
        "http.request.method": "POST",
        "http.route": "/v1/events",
        "webhook.event.id": event_id,
        "webhook.event.type": "traced",
        "webhook.application": app,
        "http.response.status_code": 202,
        "webhook.ingest.outcome": "created",
    }
    assert ingest.resource["service.name"] == "webhook-service-test"
    assert ingest.resource["webhook.role"] == "api"

    deliveries = {d["endpoint_id"]: d["id"] for d in event["deliveries"]}
    attempts = {a.attributes["webhook.endpoint.id"]: a for a in _attempts(collector, event_id)}
    assert set(attempts) == {header_ep, plain_ep}
    for endpoint_id, attempt in attempts.items():
        assert attempt.kind == KIND_CLIENT and attempt.parent_span_id == ""
        assert attempt.trace_id != TRACE  # a trace of its own, linked to the producer's
        assert attempt.links == ((TRACE, SPAN),)
        assert attempt.resource["webhook.role"] == "worker"
        attrs = attempt.attributes
        assert attrs["webhook.event.id"] == event_id
        assert attrs["webhook.delivery.id"] == deliveries[endpoint_id]
        assert (attrs["webhook.attempt"], attrs["http.response.status_code"]) == (1, 200)
        assert attrs["webhook.delivery.status"] == "succeeded"
        assert attrs["webhook.attempt.duration_ms"] >= 0
        steps = {c.name: c for c in collector.children(attempt)}
        # In order, within the attempt: the lease first, the record last.
        assert attempt.start_ns == steps["lease"].start_ns
        assert steps["lease"].end_ns <= steps["sign"].start_ns
        assert steps["sign"].end_ns <= steps["send"].start_ns
        assert steps["send"].end_ns <= steps["record"].start_ns
        assert steps["record"].end_ns <= attempt.end_ns

    # The webhook-id is the event's id: the first event's requests, one per endpoint.
    [with_header] = [r for r in receiver.for_endpoint("header") if r.webhook_id == event_id]
    named = attempts[header_ep]
    version, trace_id, span_id, flags = str(_header(with_header, "traceparent")).split("-")
    assert (version, trace_id, span_id) == ("00", named.trace_id, named.span_id)
    assert int(flags, 16) & 1  # sampled (the SDK may set W3C level 2's random bit too)
    assert all(_header(r, "traceparent") is None for r in receiver.for_endpoint("plain"))

    [nested_ingest] = collector.named("POST /v1/applications/{app}/events")
    assert nested_ingest.parent_span_id == ""
    assert nested_ingest.attributes["webhook.event.id"] == nested_id
    for attempt in _attempts(collector, nested_id):
        assert attempt.links == ((nested_ingest.trace_id, nested_ingest.span_id),)

    # The worker's line about each attempt carries its trace.
    recorded = [
        line
        for line in _log_lines(directory, "worker-traced")
        if line["message"] == "attempt recorded" and line.get("event_id") == event_id
    ]
    assert {(line["endpoint_id"], line["trace_id"]) for line in recorded} == {
        (endpoint_id, attempt.trace_id) for endpoint_id, attempt in attempts.items()
    }


async def _untraced_events(stack: Stack, receiver: Receiver) -> None:
    """An event with the producer's traceparent through each API without tracing, to an
    endpoint that asks for the header."""
    async with api_of(stack, "api") as api:
        await _endpoint(api, receiver, "untraced", "untraced", send_traceparent=True)
        await _send(api, "/v1/events", "untraced", PRODUCER)
    async with api_of(stack, "api-none") as api:
        await _send(api, "/v1/events", "untraced", PRODUCER)
    await _until("both deliveries", lambda: len(receiver.for_endpoint("untraced")) == 2)


def _check_untraced(directory: Path, receiver: Receiver) -> None:
    # No span of ours to name: the producer's, passed on as it came.
    assert [_header(r, "traceparent") for r in receiver.received] == [PRODUCER, PRODUCER]
    for name in ("api", "api-none", "worker", "scheduler"):
        lines = list(_log_lines(directory, name))
        assert lines, name
        assert not any("trace_id" in line for line in lines), name
        assert not any(line["message"].startswith("traces on") for line in lines), name
    assert any(line["message"] == "attempt recorded" for line in _log_lines(directory, "worker"))
