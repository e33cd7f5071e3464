"""The figures /metrics adds for alerts: the store's memory and AOF (one INFO), and the
API's answers by status code (the metrics hash's http:{code} fields)."""

from __future__ import annotations

from typing import Any, cast

import pytest
import redis.exceptions
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector
from redis.asyncio import Redis

from webhook_service.api.metrics import ServerCollector, SnapshotCollector, server_info_if_answered
from webhook_service.store.telemetry import LogBacklog, ServerInfo, Snapshot

NOW = 1_800_000_000_000
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]

# As redis-py parses INFO of a Valkey whose last AOF write failed (a full disk).
INFO = {
    "used_memory": 7_340_032,
    "maxmemory": 8_388_608,
    "maxmemory_policy": "noeviction",
    "aof_enabled": 1,
    "aof_last_write_status": "err",
    "aof_last_bgrewrite_status": "ok",
}


def _samples(collector: Collector) -> Samples:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_info_read_as_store_gauges() -> None:
    samples = _samples(ServerCollector(ServerInfo.parse(INFO)))
    assert samples[("webhook_store_memory_used_bytes", ())] == 7_340_032
    assert samples[("webhook_store_memory_max_bytes", ())] == 8_388_608
    assert samples[("webhook_store_aof_enabled", ())] == 1
    assert samples[("webhook_store_aof_last_write_ok", ())] == 0
    assert samples[("webhook_store_aof_last_rewrite_ok", ())] == 1


def test_a_store_without_limits_or_aof() -> None:
    info = ServerInfo.parse({"used_memory": 1024, "maxmemory": 0, "aof_enabled": 0})
    assert info == ServerInfo(1024, 0, False, True, True)
    samples = _samples(ServerCollector(info))
    assert samples[("webhook_store_memory_max_bytes", ())] == 0
    assert samples[("webhook_store_aof_enabled", ())] == 0
    # No status fields (AOF never written): nothing failed.
    assert samples[("webhook_store_aof_last_write_ok", ())] == 1


def test_answers_by_status_code() -> None:
    counters = {"http:202": "9", "http:503": "2", "http:404": "1", "events_accepted": "9"}
    snapshot = Snapshot(counters, {"fresh": 0, "retry": 0, "due": 0}, leases_in_flight=0,
                        endpoints_disabled=0, scheduler_tick_ms=None,
                        log_backlog=LogBacklog(0, None))  # fmt: skip
    samples = _samples(SnapshotCollector(snapshot, NOW))
    responses = {
        dict(labels)["code"]: value
        for (name, labels), value in samples.items()
        if name == "webhook_http_responses_total"
    }
    assert responses == {"202": 9, "404": 1, "503": 2}


class _InfoRefused:
    """A client whose INFO fails as ``error`` says."""

    def __init__(self, error: Exception) -> None:
        self._error = error

    async def info(self) -> dict[str, Any]:
        raise self._error


async def test_an_info_the_store_will_not_answer_leaves_the_gauges_out() -> None:
    renamed = redis.exceptions.ResponseError("unknown command 'INFO'")  # rename-command
    loading = redis.exceptions.BusyLoadingError("LOADING Redis is loading the dataset")
    for error in (renamed, loading):
        assert await server_info_if_answered(cast(Redis, _InfoRefused(error))) is None
    bug = redis.exceptions.DataError("a bug")
    with pytest.raises(redis.exceptions.DataError):
        await server_info_if_answered(cast(Redis, _InfoRefused(bug)))
