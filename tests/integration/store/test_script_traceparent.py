"""The traceparent through the scripts: ingest.lua keeps it as the event's tp (ARGV[26]),
only when there is one, and every lease row of the event's deliveries carries it, with the
endpoint's send_traceparent (its field send_tp), into the Job (tracing.py links to it)."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from tests.integration.conftest import save_endpoint
from webhook_service.ids import mark_of, new_id
from webhook_service.store import keys
from webhook_service.store.applications import DEFAULT_APP_ID
from webhook_service.store.deliveries import DeliveryStore
from webhook_service.store.events import EventStore
from webhook_service.store.scripts import Scripts

pytestmark = pytest.mark.integration

NOW = 1_800_000_000_000
TYPE = "script.traceparent"
BODY = '{"type":"script.traceparent","data":{}}'
PRODUCER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


async def _endpoint(client: Redis, at: int, send_tp: str) -> str:
    endpoint_id = await save_endpoint(Scripts(client), TYPE, at)
    await client.hset(keys.endpoint(endpoint_id), mapping={"secrets": "sealed", "send_tp": send_tp})
    return endpoint_id


async def _event(client: Redis, traceparent: str | None) -> tuple[str, list[str]]:
    accepted = await EventStore(client, Scripts(client)).accept(
        event_id=new_id("msg", NOW, mark=mark_of(DEFAULT_APP_ID)), event_type=TYPE, body=BODY,
        key_id="key_1", now_ms=NOW, budget=3, grace_ms=1000, idempotency=None, wakeup=None,
        backlog_max=1_000_000, traceparent=traceparent,
    )  # fmt: skip
    return accepted.event_id, list(accepted.delivery_ids)


async def test_kept_with_the_event_and_leased_with_each_delivery(client: Redis) -> None:
    asking = await _endpoint(client, NOW - 20, "1")
    other = await _endpoint(client, NOW - 10, "")
    event_id, deliveries = await _event(client, PRODUCER)
    assert await client.hget(keys.event(event_id), "tp") == PRODUCER

    store = DeliveryStore(client, Scripts(client), app_concurrency=0)
    leased = await store.lease(deliveries, "tok", NOW + 1, 30_000, 10)
    jobs = {job.endpoint_id: job for job in leased.jobs}
    assert set(jobs) == {asking, other}
    assert {job.traceparent for job in jobs.values()} == {PRODUCER}
    assert (jobs[asking].send_traceparent, jobs[other].send_traceparent) == (True, False)


async def test_none_leaves_no_field(client: Redis) -> None:
    await _endpoint(client, NOW - 20, "1")
    event_id, deliveries = await _event(client, None)
    assert not await client.hexists(keys.event(event_id), "tp")
    store = DeliveryStore(client, Scripts(client), app_concurrency=0)
    [job] = (await store.lease(deliveries, "tok", NOW + 1, 30_000, 10)).jobs
    assert job.traceparent is None and job.send_traceparent
