"""A collector for tests: an aiohttp app on a free port taking OTLP/HTTP ``POST /v1/traces``
(protobuf), decoded with opentelemetry-proto, each span kept as a plain ``Exported``."""

from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

# SpanKind in the protocol: 1 internal, 2 server, 3 client.
KIND_INTERNAL, KIND_SERVER, KIND_CLIENT = 1, 2, 3
STATUS_ERROR = 2


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    return None if which is None else getattr(value, which)


@dataclass(frozen=True)
class Exported:
    """One span as the SDK exported it: ids in lowercase hex, as in a traceparent."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str  # '' for a root
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    links: tuple[tuple[str, str], ...]  # (trace id, span id) of each
    status_code: int
    resource: dict[str, Any]

    def traceparent_ids(self) -> tuple[str, str]:
        return self.trace_id, self.span_id


@dataclass
class Collector:
    spans: list[Exported] = field(default_factory=list)
    requests: int = 0
    port: int = 0
    _runner: web.AppRunner | None = None

    @property
    def endpoint(self) -> str:
        """For OTEL_EXPORTER_OTLP_ENDPOINT: the exporter adds /v1/traces."""
        return f"http://127.0.0.1:{self.port}"

    def named(self, name: str) -> list[Exported]:
        return [s for s in self.spans if s.name == name]

    def children(self, parent: Exported) -> list[Exported]:
        return [
            s
            for s in self.spans
            if s.trace_id == parent.trace_id and s.parent_span_id == parent.span_id
        ]

    async def _traces(self, request: web.Request) -> web.Response:
        raw = await request.read()
        encoding = request.headers.get("Content-Encoding", "")
        if encoding == "gzip":
            raw = gzip.decompress(raw)
        elif encoding == "deflate":
            raw = zlib.decompress(raw)
        decoded = ExportTraceServiceRequest()
        decoded.ParseFromString(raw)
        self.requests += 1
        for resource_spans in decoded.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope in resource_spans.scope_spans:
                for span in scope.spans:
                    self.spans.append(
                        Exported(
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            kind=span.kind,
                            start_ns=span.start_time_unix_nano,
                            end_ns=span.end_time_unix_nano,
                            attributes={a.key: _value(a.value) for a in span.attributes},
                            links=tuple((k.trace_id.hex(), k.span_id.hex()) for k in span.links),
                            status_code=span.status.code,
                            resource=resource,
                        )
                    )
        return web.Response(
            body=ExportTraceServiceResponse().SerializeToString(),
            content_type="application/x-protobuf",
        )

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/traces", self._traces)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


def otel_env(collector: Collector) -> dict[str, str]:
    """What turns traces on in a process of the stack, exporting to ``collector`` soon after
    each span ends (the batch processor's delay, 5 s by default, made short)."""
    return {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "OTEL_SERVICE_NAME": "webhook-service-test",
    }
