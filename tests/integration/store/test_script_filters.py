"""Filters in the store: endpoint_save.lua bumps the application's filter version with every
change of a filter (and only then), EndpointStore.filters reads the filtered endpoints with
it, and ingest.lua leaves out the endpoints it is told the event did not pass, or answers
STALE, writing nothing, when the version it is given is no longer the application's."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import cast

import pytest
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from tests.integration.store.tenants import new_app
from tests.support.cluster import running
from webhook_service.ids import mark_of, new_id
from webhook_service.store import keys
from webhook_service.store.applications import DEFAULT_APP_ID
from webhook_service.store.endpoints import AppFilters, EndpointRecord, EndpointStore
from webhook_service.store.events import Accepted, EventStore, IngestOutcome, ReplayOutcome
from webhook_service.store.scripts import Scripts

pytestmark = pytest.mark.integration

NOW = 1_800_000_000_000
TYPE = "script.filtered"
FILTER = '{"data.amount":{"$gte":100}}'


async def _endpoint(
    store: EndpointStore, at: int, filter_text: str | None, app: str = DEFAULT_APP_ID
) -> EndpointRecord:
    record = EndpointRecord(
        new_id("ep", at, mark=mark_of(app)), "http://127.0.0.1:9/x", "", [TYPE], False, at, at,
        application=app, filter=filter_text,
    )  # fmt: skip
    await store.save(record, creating=True)
    return record


async def _accept(
    client: Redis, version: int | None, out: tuple[str, ...], app: str = DEFAULT_APP_ID
) -> Accepted:
    return await EventStore(client, Scripts(client)).accept(
        event_id=new_id("msg", NOW, mark=mark_of(app)), event_type=TYPE, body="{}",
        key_id="key_1", now_ms=NOW, budget=3, grace_ms=1000, idempotency=None, wakeup=None,
        backlog_max=1_000_000, app_id=app, filter_version=version, filtered_out=out,
    )  # fmt: skip


async def test_a_filter_change_bumps_the_version_and_reads_back(client: Redis) -> None:
    store = EndpointStore(client, Scripts(client))
    plain = await _endpoint(store, NOW - 3, None)
    assert await store.filters(DEFAULT_APP_ID) == AppFilters(0, ())
    picky = await _endpoint(store, NOW - 2, FILTER)
    assert await store.filters(DEFAULT_APP_ID) == AppFilters(1, ((picky.id, FILTER),))
    plain.description = "no filter change"
    picky.description = "nor here"
    await store.save(plain, creating=False)
    await store.save(picky, creating=False)
    assert (await store.filters(DEFAULT_APP_ID)).version == 1
    picky.filter = None
    await store.save(picky, creating=False)
    assert await store.filters(DEFAULT_APP_ID) == AppFilters(2, ())
    assert (await store.get(picky.id)) == picky


async def test_ingest_leaves_out_what_it_is_told_or_refuses_a_stale_version(
    client: Redis,
) -> None:
    store = EndpointStore(client, Scripts(client))
    plain = await _endpoint(store, NOW - 2, None)
    picky = await _endpoint(store, NOW - 1, FILTER)

    stale = await _accept(client, 0, ())
    assert stale.outcome is IngestOutcome.STALE
    assert await client.hget(keys.metrics(0), "events_accepted") is None

    kept = await _accept(client, 1, (picky.id,))
    assert (kept.outcome, kept.fanout) == (IngestOutcome.CREATED, 1)
    # Each endpoint's backlog counts its pending deliveries: the one made is plain's.
    assert [await client.get(keys.backlog(e.id)) for e in (plain, picky)] == ["1", None]
    both = await _accept(client, 1, ())
    assert both.fanout == 2
    events = EventStore(client, Scripts(client))
    replayed = await events.replay(
        both.event_id, None, NOW + 1, 3, 1000, sender=None, filter_version=0
    )
    assert replayed.outcome is ReplayOutcome.STALE
    replayed = await events.replay(
        both.event_id, None, NOW + 1, 3, 1000, sender=None, filter_version=1,
        filtered_out=(picky.id,),
    )  # fmt: skip
    assert (replayed.outcome, len(replayed.delivery_ids)) == (ReplayOutcome.OK, 1)
    # An example (no version given) is not checked.
    assert (await _accept(client, None, ())).outcome is IngestOutcome.CREATED


@pytest.fixture
async def cluster_client(tmp_path: Path) -> AsyncIterator[Redis]:
    with running(tmp_path) as cluster:
        node = cluster.seed
        rc = RedisCluster(
            host="127.0.0.1", port=node.port, password=cluster.password, decode_responses=True
        )
        await rc.initialize()
        yield cast(Redis, rc)  # the stores take a Redis client; a cluster one answers alike
        await rc.aclose()


async def test_on_a_cluster_every_step_stays_in_the_applications_slot(
    cluster_client: Redis,
) -> None:
    """The version's MULTI, the filters' reads and both scripts touch keys of the
    application's bucket only: a cluster would refuse a crossing (CROSSSLOT)."""
    store = EndpointStore(cluster_client, Scripts(cluster_client))
    app = await new_app(cluster_client, NOW - 3)
    await _endpoint(store, NOW - 2, None, app)
    picky = await _endpoint(store, NOW - 1, FILTER, app)
    assert await store.filters(app) == AppFilters(1, ((picky.id, FILTER),))
    assert (await _accept(cluster_client, 0, (), app)).outcome is IngestOutcome.STALE
    kept = await _accept(cluster_client, 1, (picky.id,), app)
    assert (kept.outcome, kept.fanout) == (IngestOutcome.CREATED, 1)
