"""The engine's spans and outbound traceparent, with the fakes of test_delivery_engine: an
attempt span per job with its four steps and the link, the header only for an endpoint that
asks, and with traces off the event's own traceparent passed on."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from signer import generate_secret
from tests.unit.delivery.test_delivery_engine import (
    DELIVERY_ID,
    FakeStore,
    Receiver,
    make_engine,
    make_job,
    seal,
)
from webhook_service import tracing
from webhook_service.crypto import SecretBox, generate_master_key
from webhook_service.delivery.transport import OutboundResponse

PRODUCER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.fixture
def box() -> SecretBox:
    return SecretBox(generate_master_key())


@pytest.fixture
def exported() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    assert tracing.setup("worker", {"OTEL_TRACES_EXPORTER": "otlp"}, SimpleSpanProcessor(exporter))
    try:
        yield exporter
    finally:
        tracing.shutdown()


async def _send(
    box: SecretBox, *, send_traceparent: bool, traceparent: str | None
) -> tuple[Receiver, FakeStore]:
    sealed = seal(box, (generate_secret(), None))
    job = make_job(sealed, traceparent=traceparent, send_traceparent=send_traceparent)
    receiver, store = Receiver(OutboundResponse(200, b"ok")), FakeStore([job])
    await make_engine(store, box, receiver).run([DELIVERY_ID])
    return receiver, store


async def test_an_attempt_span_with_its_steps_names_the_header(
    box: SecretBox, exported: InMemorySpanExporter
) -> None:
    receiver, store = await _send(box, send_traceparent=True, traceparent=PRODUCER)
    spans = {s.name: s for s in exported.get_finished_spans()}
    assert sorted(spans) == ["attempt", "lease", "record", "send", "sign"]
    attempt = spans["attempt"]
    assert attempt.attributes is not None
    assert attempt.attributes["webhook.delivery.id"] == DELIVERY_ID
    assert attempt.attributes["http.response.status_code"] == 200
    assert [tracing.traceparent_of(link.context) for link in attempt.links] == [PRODUCER]
    [sent] = receiver.requests
    assert sent.headers["traceparent"] == tracing.traceparent_of(attempt.context)
    # Ours, recorded as sent (no credential of the endpoint's).
    [record] = store.records
    assert record["attempt"].request_headers["traceparent"] == sent.headers["traceparent"]


async def test_no_header_unless_the_endpoint_asks(
    box: SecretBox, exported: InMemorySpanExporter
) -> None:
    receiver, _ = await _send(box, send_traceparent=False, traceparent=PRODUCER)
    [sent] = receiver.requests
    assert "traceparent" not in sent.headers
    assert [s.name for s in exported.get_finished_spans()].count("attempt") == 1


async def test_with_traces_off_the_events_own_is_passed_on(box: SecretBox) -> None:
    assert not tracing.enabled()
    [sent] = (await _send(box, send_traceparent=True, traceparent=PRODUCER))[0].requests
    assert sent.headers["traceparent"] == PRODUCER
    [none] = (await _send(box, send_traceparent=True, traceparent=None))[0].requests
    assert "traceparent" not in none.headers
