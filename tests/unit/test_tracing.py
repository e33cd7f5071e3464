"""tracing.py: which variables turn traces on, the traceparent's W3C form, and the spans the
helpers make (into the SDK's in-memory exporter), with the log lines' trace ids."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import orjson
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from webhook_service import logs, tracing
from webhook_service.config import Settings

TRACE, SPAN = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
PRODUCER = f"00-{TRACE}-{SPAN}-01"
ON = {"OTEL_TRACES_EXPORTER": "otlp"}


@pytest.mark.parametrize(
    ("environ", "on"),
    [
        ({}, False),  # the SDK's own default would export to localhost:4318: not ours
        ({"OTEL_SERVICE_NAME": "x", "OTEL_TRACES_SAMPLER": "always_on"}, False),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
        ({"OTEL_TRACES_EXPORTER": "console,OTLP"}, True),
        ({"OTEL_TRACES_EXPORTER": "none"}, False),
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, False),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "TRUE"}, False),
    ],
)
def test_wanted_only_when_the_standard_variables_ask(environ: dict[str, str], on: bool) -> None:
    assert tracing.wanted(environ) is on


def test_setup_stays_off_without_the_variables_and_for_grpc() -> None:
    assert tracing.setup("api", {}) is False
    assert not tracing.enabled()
    grpc = {**ON, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
    assert tracing.setup("api", grpc) is False  # only http/protobuf is shipped
    assert not tracing.enabled()


@pytest.mark.parametrize(
    ("header", "kept"),
    [
        (PRODUCER, PRODUCER),
        (f"  {PRODUCER} ", PRODUCER),
        (f"00-{TRACE}-{SPAN}-00", f"00-{TRACE}-{SPAN}-00"),
        # a later version: its first four fields, whatever follows
        (f"cc-{TRACE}-{SPAN}-01-what-ever", f"cc-{TRACE}-{SPAN}-01"),
        (None, None),
        ("", None),
        ("00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01", None),  # uppercase
        ("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", None),  # version ff
        ("00-00000000000000000000000000000000-00f067aa0ba902b7-01", None),  # zero trace id
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", None),  # zero span id
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", None),  # 00 has 4 fields
        ("00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01", None),  # short trace id
        ("00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01", None),
        ("not a traceparent", None),
    ],
)  # fmt: skip
def test_valid_traceparent(header: str | None, kept: str | None) -> None:
    assert tracing.valid_traceparent(header) == kept


def test_span_context_round_trips_to_the_header() -> None:
    context = tracing.span_context_of(PRODUCER)
    assert context is not None and context.is_remote
    assert tracing.traceparent_of(context) == PRODUCER
    assert tracing.span_context_of("garbage") is None


def test_helpers_do_nothing_while_off() -> None:
    assert not tracing.enabled()
    with tracing.ingest_span("POST", "/v1/events", PRODUCER) as span:
        assert not span.is_recording()
        tracing.note(event_id="msg_1")
        tracing.answered(span, 202, "created")
        assert tracing.current_ids() is None
    of = tracing.AttemptOf("dlv_1", "msg_1", "ep_1", 1, PRODUCER)
    with tracing.attempt(of, tracing.Leased(1, 2)) as traced:
        with traced.step("send"):
            pass
        traced.sent(200, 5, None)
        assert traced.traceparent() is None


@pytest.fixture
def exported() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    assert tracing.setup("worker", ON, SimpleSpanProcessor(exporter))
    try:
        yield exporter
    finally:
        tracing.shutdown()
    assert not tracing.enabled()


def _named(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    [found] = [s for s in exporter.get_finished_spans() if s.name == name]
    return found


def test_ingest_span_is_the_producers_child(exported: InMemorySpanExporter) -> None:
    with tracing.ingest_span("POST", "/v1/applications/{app}/events", PRODUCER) as span:
        tracing.note(event_id="msg_1", event_type="invoice.paid", application="app_1")
        tracing.answered(span, 202, "created")
    ingest = _named(exported, "POST /v1/applications/{app}/events")
    assert ingest.kind is SpanKind.SERVER
    assert ingest.parent is not None and ingest.parent.is_remote
    assert (f"{ingest.context.trace_id:032x}", f"{ingest.parent.span_id:016x}") == (
        PRODUCER.split("-")[1],
        PRODUCER.split("-")[2],
    )
    assert dict(ingest.attributes or {}) == {
        "http.request.method": "POST",
        "http.route": "/v1/applications/{app}/events",
        "webhook.event.id": "msg_1",
        "webhook.event.type": "invoice.paid",
        "webhook.application": "app_1",
        "http.response.status_code": 202,
        "webhook.ingest.outcome": "created",
    }
    assert ingest.resource.attributes["webhook.role"] == "worker"
    assert ingest.resource.attributes["service.name"] == tracing.DEFAULT_SERVICE_NAME


def test_ingest_span_without_a_producer_is_a_root_and_a_5xx_an_error(
    exported: InMemorySpanExporter,
) -> None:
    with tracing.ingest_span("POST", "/v1/events", None) as span:
        tracing.answered(span, 503, "log-backlog-full")
    ingest = _named(exported, "POST /v1/events")
    assert ingest.parent is None
    assert ingest.status.status_code is StatusCode.ERROR


def test_attempt_span_its_children_and_the_link(exported: InMemorySpanExporter) -> None:
    of = tracing.AttemptOf("dlv_1", "msg_1", "ep_1", 3, PRODUCER)
    leased = tracing.Leased(tracing.now_ns(), tracing.now_ns() + 1000)
    # Made inside another span, as a record that leases the next parked delivery is: the
    # attempt is a root all the same.
    with tracing.ingest_span("POST", "/v1/events", None), tracing.attempt(of, leased) as traced:
        for step in ("sign", "send", "record"):
            with traced.step(step):
                pass
        traced.sent(503, 42, None)
        traced.recorded("pending")
        header = traced.traceparent()
    attempt = _named(exported, "attempt")
    assert attempt.parent is None and attempt.kind is SpanKind.CLIENT
    assert attempt.start_time == leased.started_ns
    assert [
        (f"{link.context.trace_id:032x}", f"{link.context.span_id:016x}") for link in attempt.links
    ] == [tuple(PRODUCER.split("-")[1:3])]
    assert dict(attempt.attributes or {}) == {
        "webhook.delivery.id": "dlv_1",
        "webhook.event.id": "msg_1",
        "webhook.endpoint.id": "ep_1",
        "webhook.attempt": 3,
        "webhook.attempt.duration_ms": 42,
        "http.response.status_code": 503,
        "webhook.delivery.status": "pending",
    }
    assert attempt.status.status_code is StatusCode.ERROR
    assert header == tracing.traceparent_of(attempt.context)
    children = [
        s
        for s in exported.get_finished_spans()
        if s.parent and s.parent.span_id == attempt.context.span_id
    ]
    assert sorted(s.name for s in children) == ["lease", "record", "send", "sign"]
    lease = _named(exported, "lease")
    assert (lease.start_time, lease.end_time) == (leased.started_ns, leased.ended_ns)


def test_attempt_without_a_traceparent_has_no_link_and_a_2xx_no_error(
    exported: InMemorySpanExporter,
) -> None:
    of = tracing.AttemptOf("dlv_1", "msg_1", "ep_1", 1, None)
    with tracing.attempt(of, tracing.Leased(tracing.now_ns(), tracing.now_ns())) as traced:
        traced.sent(204, 3, None)
    attempt = _named(exported, "attempt")
    assert not attempt.links
    assert attempt.status.status_code is StatusCode.UNSET


def test_a_network_error_is_told(exported: InMemorySpanExporter) -> None:
    of = tracing.AttemptOf("dlv_1", "msg_1", "ep_1", 1, None)
    with tracing.attempt(of, tracing.Leased(tracing.now_ns(), tracing.now_ns())) as traced:
        traced.sent(None, 3000, "timeout")
    attempt = _named(exported, "attempt")
    assert (
        attempt.attributes is not None and attempt.attributes["webhook.attempt.error"] == "timeout"
    )
    assert "http.response.status_code" not in attempt.attributes
    assert attempt.status.status_code is StatusCode.ERROR


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, logging.getLogRecordFactory())
    stream = io.StringIO()
    logs.setup(Settings(log_format="json", admin_key="whadm_" + "k" * 32), "worker")
    handler = root.handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(stream)
    yield stream
    root.handlers, level, factory = saved
    root.setLevel(level)
    logging.setLogRecordFactory(factory)


def test_log_lines_carry_the_current_spans_ids(
    exported: InMemorySpanExporter, captured: io.StringIO
) -> None:
    logger = logging.getLogger("webhook_service.test")
    logger.info("outside")
    of = tracing.AttemptOf("dlv_1", "msg_1", "ep_1", 1, None)
    leased = tracing.Leased(tracing.now_ns(), tracing.now_ns())
    with tracing.attempt(of, leased) as traced, traced.step("record"):
        logger.info("inside")
    outside, inside = (orjson.loads(line) for line in captured.getvalue().splitlines()[-2:])
    assert "trace_id" not in outside and "span_id" not in outside
    record = _named(exported, "record")
    assert (inside["trace_id"], inside["span_id"]) == (
        f"{record.context.trace_id:032x}",
        f"{record.context.span_id:016x}",
    )
