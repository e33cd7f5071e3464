"""GET /metrics (Prometheus), and the count of events the API turns away.

The figures are cluster-wide: they live in Redis (``store/telemetry.py``), written by the
Lua steps of every worker and API process, and a scrape turns one snapshot of them into
metric families through a collector. Labels are bounded: outcome, class, queue, reason,
cause, and event_type (of the catalog's types with a schema, store/event_types.py). The
log's backlog (records in the outbox, the age of the oldest) is read there too: while SQL
is away it grows in Redis, and that is where an operator must see it.

The store's memory against its ``maxmemory`` and its AOF's last write come from one INFO
a scrape (``ServerCollector``): with ``noeviction`` a full store refuses every write, and an
AOF write that failed (a full disk) makes it refuse them too, so both are alerts
(deploy/prometheus/alerts.yml).

Two families are this process's own: the store's refusals by cause, counted where they
happen, and whether this scrape could read the store. They are exactly what is wanted
while the store refuses, when the cluster-wide figures cannot be read: the scrape then
answers 200 with these two alone, rather than a 503 that would leave a dashboard blank.

With WEBHOOK_LOG_READ_URL a scrape also asks the standby how far behind its replay is
(``webhook_log_read_lag_seconds``); a standby that does not answer leaves it out.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import redis.exceptions
from aiohttp import web
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry
from redis.asyncio import Redis

from webhook_service.api.context import services
from webhook_service.api.problems import Handler, ProblemError
from webhook_service.history.database import REPLAY_LAG
from webhook_service.history.reader import HistoryReader, LogUnavailable
from webhook_service.store import buckets
from webhook_service.store.deliveries import STATUS_CLASSES
from webhook_service.store.refusals import REFUSALS, Refusal, refused
from webhook_service.store.telemetry import (
    ServerInfo,
    Snapshot,
    count_rejection,
    server_info,
    snapshot,
)
from webhook_service.timeutil import now_ms

routes = web.RouteTableDef()

# Largest finite buckets: 2^15 ms (33 s) is above any request timeout worth having, 2^27 ms
# (37 h) above the default retry schedule (27.6 h). Larger values count under +Inf.
DURATION_TOP = 15
LATENCY_TOP = 27
FINAL_STATUSES = ("succeeded", "failed", "disabled")


class SnapshotCollector(Collector):
    def __init__(self, data: Snapshot, now: int) -> None:
        self._data = data
        self._now = now

    def _count(self, field: str) -> int:
        return int(self._data.counters.get(field, 0))

    def _histogram(self, name: str, doc: str, field: str, top: int) -> HistogramMetricFamily:
        counts = buckets.parse(self._data.counters, field + ":")
        rows = [(str(le), float(n)) for le, n in buckets.cumulative(counts, top)]
        rows.append(("+Inf", float(sum(counts.values()))))
        total_ms = self._count(field + "_sum_ms")
        return HistogramMetricFamily(name, doc, buckets=rows, sum_value=total_ms / 1000)

    def collect(self) -> Iterator[Metric]:
        data = self._data
        yield CounterMetricFamily(
            "webhook_events_accepted", "Events stored.", value=self._count("events_accepted")
        )
        rejected = CounterMetricFamily(
            "webhook_events_rejected", "Event submissions refused, by reason.", labels=["reason"]
        )
        for field, value in sorted(data.counters.items()):
            if field.startswith("rejected:"):
                rejected.add_metric([field.partition(":")[2]], int(value))
        yield rejected
        violations = CounterMetricFamily(
            "webhook_schema_violations",
            "Events stored though their data broke their catalog type's schema "
            "(WEBHOOK_VALIDATE_EVENTS=warn), by type.",
            labels=["event_type"],
        )
        for field, value in sorted(data.counters.items()):
            if field.startswith("schema_violations:"):
                violations.add_metric([field.partition(":")[2]], int(value))
        yield violations
        outcomes = CounterMetricFamily(
            "webhook_deliveries", "Deliveries that reached a final status.", labels=["outcome"]
        )
        for status in FINAL_STATUSES:
            outcomes.add_metric([status], self._count("outcome:" + status))
        yield outcomes
        attempts = CounterMetricFamily(
            "webhook_attempts", "Delivery attempts, by what they got.", labels=["class"]
        )
        for status_class in STATUS_CLASSES:
            attempts.add_metric([status_class], self._count("attempts:" + status_class))
        yield attempts
        responses = CounterMetricFamily(
            "webhook_http_responses",
            "The API's answers, by HTTP status code, of every API process (not /healthz, "
            "/readyz or /metrics: probes and scrapes).",
            labels=["code"],
        )
        codes = sorted(
            (int(field.partition(":")[2]), int(n))
            for field, n in data.counters.items()
            if field.startswith("http:")
        )
        for code, n in codes:
            responses.add_metric([str(code)], n)
        yield responses
        yield self._histogram(
            "webhook_attempt_duration_seconds",
            "How long one delivery attempt took.",
            "duration",
            DURATION_TOP,
        )
        yield self._histogram(
            "webhook_delivery_latency_seconds",
            "From a delivery's creation (its event's ingest) to its successful attempt.",
            "latency",
            LATENCY_TOP,
        )
        depths = GaugeMetricFamily(
            "webhook_queue_depth",
            "fresh and retry: Celery messages waiting; due: deliveries waiting for their "
            "time. (A failed delivery is history, in the SQL log, not work waiting.)",
            labels=["queue"],
        )
        for queue, depth in data.queue_depths.items():
            depths.add_metric([queue], depth)
        yield depths
        yield GaugeMetricFamily(
            "webhook_leases_in_flight", "Deliveries being sent now.", value=data.leases_in_flight
        )
        yield GaugeMetricFamily(
            "webhook_endpoints_disabled", "Disabled endpoints.", value=data.endpoints_disabled
        )
        yield GaugeMetricFamily(
            "webhook_log_backlog",
            "Log records in the Redis outbox not yet written to the SQL log; ingest answers "
            "503 once there are WEBHOOK_LOG_BACKLOG_MAX.",
            value=data.log_backlog.records,
        )
        yield GaugeMetricFamily(
            "webhook_log_lag_seconds",
            "How long the oldest record in the log outbox has waited for SQL; 0 when none.",
            value=data.log_backlog.lag_ms(self._now) / 1000,
        )
        if data.scheduler_tick_ms is not None:
            yield GaugeMetricFamily(
                "webhook_scheduler_lag_seconds",
                "Time since the bucket passed over longest ago was last passed by its "
                "scheduler (every bucket has been within it).",
                value=max(0, self._now - data.scheduler_tick_ms) / 1000,
            )


class ServerCollector(Collector):
    """The store server's memory and AOF, as INFO tells them."""

    def __init__(self, info: ServerInfo) -> None:
        self._info = info

    def collect(self) -> Iterator[Metric]:
        info = self._info
        yield GaugeMetricFamily(
            "webhook_store_memory_used_bytes",
            "Memory the store uses (INFO used_memory).",
            value=info.used_memory,
        )
        yield GaugeMetricFamily(
            "webhook_store_memory_max_bytes",
            "The store's maxmemory; 0 when none is set. At it, noeviction refuses writes.",
            value=info.maxmemory,
        )
        yield GaugeMetricFamily(
            "webhook_store_aof_enabled",
            "1 when the store's AOF is on.",
            value=int(info.aof_enabled),
        )
        yield GaugeMetricFamily(
            "webhook_store_aof_last_write_ok",
            "0 when the store's last AOF write failed (INFO aof_last_write_status err): it "
            "refuses writes until one succeeds.",
            value=int(info.aof_last_write_ok),
        )
        yield GaugeMetricFamily(
            "webhook_store_aof_last_rewrite_ok",
            "0 when the store's last AOF rewrite failed (INFO aof_last_bgrewrite_status err).",
            value=int(info.aof_last_rewrite_ok),
        )


class ReadLagCollector(Collector):
    """The replay lag of the standby the history is read from (WEBHOOK_LOG_READ_URL)."""

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "webhook_log_read_lag_seconds",
            "How far the standby the history is read from replays behind the log's primary; "
            "above WEBHOOK_HOT_SECONDS, what has just left Redis is missing from the history.",
            value=self._seconds,
        )


async def read_lag(history: HistoryReader) -> float | None:
    """None when the standby does not answer, or is no standby (then it has no replay)."""
    try:
        (row,) = await history.rows(REPLAY_LAG)
    except LogUnavailable:
        return None
    return None if row[0] is None else float(row[0])


class ProcessCollector(Collector):
    """What this process knows without the store."""

    def __init__(self, refusals: dict[Refusal, int], readable: bool) -> None:
        self._refusals = refusals
        self._readable = readable

    def collect(self) -> Iterator[Metric]:
        refusals = CounterMetricFamily(
            "webhook_store_refusals",
            "Store commands refused in this API process, by cause (store/refusals.py).",
            labels=["cause"],
        )
        for cause in Refusal:
            refusals.add_metric([cause.value], self._refusals.get(cause, 0))
        yield refusals
        yield GaugeMetricFamily(
            "webhook_store_readable",
            "1 when this scrape read the cluster-wide figures from the store; 0 when the store "
            "refused, and they are left out.",
            value=int(self._readable),
        )


@routes.get("/metrics")
async def metrics(request: web.Request) -> web.Response:
    now = now_ms()
    registry = CollectorRegistry(auto_describe=False)
    data: Snapshot | None = None
    try:
        data = await snapshot(services(request).redis, now)
    except redis.exceptions.RedisError as exc:
        if not refused(exc, "reading the metrics"):
            raise
    if data is not None:
        registry.register(SnapshotCollector(data, now))
        server = await server_info_if_answered(services(request).redis)
        if server is not None:
            registry.register(ServerCollector(server))
    if services(request).settings.log_read_url is not None:
        lag = await read_lag(services(request).history)
        if lag is not None:
            registry.register(ReadLagCollector(lag))
    registry.register(ProcessCollector(REFUSALS.counts(), data is not None))
    encode, content_type = choose_encoder(request.headers.get("Accept", ""))
    return web.Response(body=encode(registry), headers={"Content-Type": content_type})


async def server_info_if_answered(client: Redis) -> ServerInfo | None:
    """None when the store refuses INFO, or has it renamed away (an error of its own, not a
    refusal): the other figures stand."""
    try:
        return await server_info(client)
    except redis.exceptions.RedisError as exc:
        if refused(exc, "reading the store's INFO"):
            return None
        if isinstance(exc, redis.exceptions.ResponseError):
            return None
        raise


_INGEST = ("POST", "/v1/events")


@web.middleware
async def rejection_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Counts POST /v1/events answered 4xx, by problem kind (a bounded set)."""
    try:
        return await handler(request)
    except ProblemError as exc:
        if (request.method, request.path) == _INGEST and 400 <= exc.status < 500:
            # A metric must never turn a 4xx into a 503.
            with contextlib.suppress(redis.exceptions.RedisError):
                await count_rejection(services(request).redis, exc.kind)
        raise
