"""OpenTelemetry traces, off unless the standard ``OTEL_*`` variables turn them on.

On (``wanted``) when ``OTEL_TRACES_EXPORTER`` names ``otlp``, or when it is unset and
``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set; never with
``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none``. The SDK's default (export over
OTLP to localhost:4318 whenever the SDK is installed) would have every deployment try to
reach a collector it never asked for. Spans leave over OTLP/HTTP (protobuf) only; the SDK
reads the rest of the ``OTEL_*`` variables itself (endpoint, headers, sampler, batch delays,
resource attributes).

Each process configures it once (``setup``: the API, each worker child, the scheduler) and
flushes what is left at exit (``shutdown``). Our own provider, not the global one: nothing
else in the process is instrumented, and so a test may set it up and take it down again.

What is traced:

* ingest (``ingest_span``): one SERVER span per ``POST /v1/events`` (both routes), a child
  of the producer's ``traceparent`` when it sent one;
* each attempt (``attempt``): a root CLIENT span with children ``lease``, ``sign``, ``send``
  and ``record``, linked to the producer's ``traceparent`` stored with the event (or to the
  ingest span, when the producer sent none), so that every attempt of an event, however
  late, is found from the producer's trace without making it one trace hours long.

When traces are off every helper here costs a flag test and does nothing.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

if TYPE_CHECKING:
    # The SDK is imported only once traces are on (setup): every process and command logs
    # through logs.py, which imports this module, and most never trace.
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

log = logging.getLogger(__name__)

TRACEPARENT = "traceparent"  # the W3C header, in and out
DEFAULT_SERVICE_NAME = "webhook-service"
# The one protocol shipped (opentelemetry-exporter-otlp-proto-http).
PROTOCOL = "http/protobuf"

# W3C Trace Context: version-trace_id-parent_id-flags, lowercase hex. A later version may
# append fields after a '-'; its first four are read as version 00's.
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")
_PROPAGATOR = TraceContextTextMapPropagator()

# Attribute names: the HTTP ones of the semantic conventions, ours under webhook.*.
EVENT_ID = "webhook.event.id"
EVENT_TYPE = "webhook.event.type"
APPLICATION = "webhook.application"
INGEST_OUTCOME = "webhook.ingest.outcome"
ENDPOINT_ID = "webhook.endpoint.id"
DELIVERY_ID = "webhook.delivery.id"
ATTEMPT = "webhook.attempt"
ATTEMPT_DURATION_MS = "webhook.attempt.duration_ms"
ATTEMPT_ERROR = "webhook.attempt.error"
DELIVERY_STATUS = "webhook.delivery.status"
STATUS_CODE = "http.response.status_code"
METHOD = "http.request.method"
ROUTE = "http.route"
ROLE = "webhook.role"


def valid_traceparent(value: str | None) -> str | None:
    """The header's first four fields (``00-<trace>-<span>-<flags>`` form) when ``value`` is
    a W3C traceparent, else None: an invalid one is dropped, as the spec asks a receiver to
    do, rather than refusing the event."""
    if not value:
        return None
    found = _TRACEPARENT.fullmatch(value.strip())
    if found is None:
        return None
    version, trace_id, span_id, flags, rest = found.groups()
    if version == "ff" or (version == "00" and rest is not None):
        return None
    if trace_id == "0" * 32 or span_id == "0" * 16:
        return None
    return f"{version}-{trace_id}-{span_id}-{flags}"


def span_context_of(traceparent: str | None) -> SpanContext | None:
    """The remote span a stored (valid) traceparent names."""
    valid = valid_traceparent(traceparent)
    if valid is None:
        return None
    _, trace_id, span_id, flags = valid.split("-")
    return SpanContext(
        int(trace_id, 16), int(span_id, 16), is_remote=True, trace_flags=TraceFlags(int(flags, 16))
    )


def traceparent_of(context: SpanContext) -> str | None:
    """The W3C header naming ``context``; None for an invalid one."""
    if not context.is_valid:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


def wanted(environ: Mapping[str, str]) -> bool:
    """Whether the standard variables ask for traces (the module's head says which)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = [
        name.strip().lower()
        for name in environ.get("OTEL_TRACES_EXPORTER", "").split(",")
        if name.strip()
    ]
    if exporters:
        others = [name for name in exporters if name not in ("otlp", "none")]
        if others:
            log.warning("OTEL_TRACES_EXPORTER: only otlp is shipped; %s ignored", others)
        return "otlp" in exporters
    return bool(
        environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def _protocol(environ: Mapping[str, str]) -> str:
    return (
        environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or PROTOCOL
    ).strip()


@dataclass
class _Tracing:
    provider: TracerProvider
    tracer: trace.Tracer


_state: _Tracing | None = None


def enabled() -> bool:
    return _state is not None


def setup(
    role: str,
    environ: Mapping[str, str] | None = None,
    processor: SpanProcessor | None = None,
) -> bool:
    """Start tracing in this process if the variables ask for it; True when on. Repeating
    it changes nothing. ``processor``: where spans go instead of the OTLP exporter (tests)."""
    global _state
    if _state is not None:
        return True
    env = os.environ if environ is None else environ
    if not wanted(env):
        return False
    from opentelemetry.sdk.trace import TracerProvider

    if processor is None:
        if _protocol(env) != PROTOCOL:
            log.warning(
                "traces off: OTEL_EXPORTER_OTLP_PROTOCOL %r asked for, only %s is shipped",
                _protocol(env),
                PROTOCOL,
            )
            return False
        # Imported only when on: the exporter pulls in protobuf and requests.
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        processor = BatchSpanProcessor(OTLPSpanExporter())
    provider = TracerProvider(resource=_resource(role, env))
    provider.add_span_processor(processor)
    _state = _Tracing(provider, provider.get_tracer("webhook_service"))
    log.info("traces on: exported over OTLP/HTTP (OTEL_* variables)")
    return True


def _resource(role: str, environ: Mapping[str, str]) -> Resource:
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource

    # Resource.create reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES from os.environ;
    # without a name of theirs it says unknown_service, which ours replaces.
    made = Resource.create({ROLE: role})
    if not environ.get("OTEL_SERVICE_NAME") and str(
        made.attributes.get(SERVICE_NAME, "")
    ).startswith("unknown_service"):
        made = made.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
    return made


def shutdown() -> None:
    """Export what is still buffered and stop; tracing is off afterwards."""
    global _state
    if _state is None:
        return
    state, _state = _state, None
    state.provider.shutdown()


def current_ids() -> tuple[str, str] | None:
    """The current span's trace and span ids in hex, for log lines; None outside one."""
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return f"{context.trace_id:032x}", f"{context.span_id:016x}"


@contextmanager
def ingest_span(method: str, route: str, traceparent: str | None) -> Iterator[Span]:
    """The span of one ingest request, current while it runs: a child of the producer's
    ``traceparent`` (already valid or None). Set what becomes known with ``note`` and
    the answer with ``answered``."""
    if _state is None:
        yield trace.INVALID_SPAN
        return
    parent = _PROPAGATOR.extract({TRACEPARENT: traceparent}) if traceparent else Context()
    with _state.tracer.start_as_current_span(
        f"{method} {route}",
        context=parent,
        kind=SpanKind.SERVER,
        attributes={METHOD: method, ROUTE: route},
        # A problem is an answer, told by its status (answered), not an exception event.
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        yield span


def note(**attributes: str | int) -> None:
    """Attributes of the current span (``event_id=…`` becomes ``webhook.event.id``…), when
    one records."""
    if _state is None:
        return
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attributes({_NOTED[name]: value for name, value in attributes.items()})


_NOTED = {
    "event_id": EVENT_ID,
    "event_type": EVENT_TYPE,
    "application": APPLICATION,
    "outcome": INGEST_OUTCOME,
}


def answered(span: Span, status: int, outcome: str) -> None:
    """The ingest request's answer: its status code and what became of the event
    (``created``, ``replay``, or the problem's kind)."""
    if not span.is_recording():
        return
    span.set_attributes({STATUS_CODE: status, INGEST_OUTCOME: outcome})
    if status >= 500:
        span.set_status(Status(StatusCode.ERROR))


def now_ns() -> int:
    return time.time_ns()


@dataclass(frozen=True)
class Leased:
    """When the lease that brought an attempt was taken (ns since the epoch): a batch's
    lease call, or the record that leased the next parked delivery. Every attempt of the
    batch shows it as its ``lease`` child."""

    started_ns: int
    ended_ns: int


@dataclass(frozen=True)
class AttemptOf:
    """What names an attempt in its span."""

    delivery_id: str
    event_id: str
    endpoint_id: str
    attempt: int
    traceparent: str | None  # the event's stored one, linked from the span


class AttemptTrace:
    """One attempt's span and its children; every method does nothing when traces are off
    (``span`` is then the invalid span)."""

    def __init__(self, span: Span, tracer: trace.Tracer | None) -> None:
        self.span = span
        self._tracer = tracer
        self.context = trace.set_span_in_context(span)  # its children's parent

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """A child of the attempt (``sign``, ``send``, ``record``), current while it runs,
        so that log lines within carry its ids."""
        if self._tracer is None:
            yield
            return
        with self._tracer.start_as_current_span(name, context=self.context):
            yield

    def traceparent(self) -> str | None:
        """The outbound header naming the attempt span (an endpoint's send_traceparent)."""
        return traceparent_of(self.span.get_span_context())

    def sent(self, status: int | None, duration_ms: int, error: str | None) -> None:
        if not self.span.is_recording():
            return
        self.span.set_attribute(ATTEMPT_DURATION_MS, duration_ms)
        if status is not None:
            self.span.set_attribute(STATUS_CODE, status)
        if error is not None:
            self.span.set_attribute(ATTEMPT_ERROR, error)
        if status is None or not 200 <= status < 300:
            self.span.set_status(Status(StatusCode.ERROR, error or f"answered {status}"))

    def recorded(self, status: str) -> None:
        """The delivery's status once the attempt is recorded (pending, succeeded…)."""
        if self.span.is_recording():
            self.span.set_attribute(DELIVERY_STATUS, str(status))  # a StrEnum's value


@contextmanager
def attempt(of: AttemptOf, leased: Leased) -> Iterator[AttemptTrace]:
    """The span of one attempt, from its lease to its record: a root of its own (never
    a child of the attempt whose record leased it), linked to the event's traceparent."""
    if _state is None:
        yield AttemptTrace(trace.INVALID_SPAN, None)
        return
    tracer = _state.tracer
    linked = span_context_of(of.traceparent)
    attributes: dict[str, Any] = {
        DELIVERY_ID: of.delivery_id,
        EVENT_ID: of.event_id,
        ENDPOINT_ID: of.endpoint_id,
        ATTEMPT: of.attempt,
    }
    span = tracer.start_span(
        "attempt",
        context=Context(),
        kind=SpanKind.CLIENT,
        attributes=attributes,
        links=[Link(linked)] if linked is not None else None,
        start_time=leased.started_ns,
    )
    traced = AttemptTrace(span, tracer)
    lease = tracer.start_span("lease", context=traced.context, start_time=leased.started_ns)
    lease.end(end_time=leased.ended_ns)
    # Ended on the way out, an exception recorded on it (a store gone mid-record).
    with trace.use_span(span, end_on_exit=True):
        yield traced
