"""Delivery ids and the fields their hashes leave out, through the real scripts: the Lua
spelling of an id agrees with ids.delivery_id (with an endpoint's sequence number), and a
reader gets back every field the hash did not keep (keys.py, "Derived fields")."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from tests.integration.conftest import save_endpoint
from tests.support.replies import text
from webhook_service.ids import delivery_id, event_deliveries, looks_like, new_id
from webhook_service.store import keys
from webhook_service.store.deliveries import DeliveryStore
from webhook_service.store.endpoints import EndpointStore
from webhook_service.store.events import EventStore
from webhook_service.store.scripts import Scripts

pytestmark = pytest.mark.integration

NOW = 1_800_000_000_000
TYPE = "ids.made"


async def _endpoint(scripts: Scripts, at: int) -> str:
    return await save_endpoint(scripts, TYPE, at)


async def _accept(events: EventStore, event_id: str, now: int) -> tuple[str, ...]:
    accepted = await events.accept(
        event_id=event_id, event_type=TYPE, body="{}", key_id="key_1", now_ms=now,
        budget=3, grace_ms=1000, idempotency=None, wakeup=None, backlog_max=1_000_000,
    )  # fmt: skip
    return accepted.delivery_ids


async def test_the_scripts_build_the_ids_python_spells(client: Redis) -> None:
    scripts = Scripts(client)
    first, second = await _endpoint(scripts, NOW - 2), await _endpoint(scripts, NOW - 1)
    seqs = [int(await client.hget(keys.endpoint(ep), "seq") or 0) for ep in (first, second)]
    assert seqs[1] == seqs[0] + 1

    event_id = new_id("msg", NOW)
    ids = await _accept(EventStore(client, scripts), event_id, NOW)
    expected = [delivery_id(event_id, first, seqs[0]), delivery_id(event_id, second, seqs[1])]
    # Sorted, they list as their endpoints were made.
    assert sorted(ids) == expected
    assert all(looks_like(d, "dlv") for d in ids) and len(expected[0]) == 32
    # The event lists the short ones by their tails.
    dlvs = text(await client.hget(keys.event(event_id), "dlvs"))
    assert dlvs is not None and len(dlvs) < 40
    assert sorted(event_deliveries(event_id, dlvs)) == expected
    # Ingest is deterministic: another event to the same endpoints ends the same way.
    again = await _accept(EventStore(client, scripts), new_id("msg", NOW + 1), NOW + 1)
    assert sorted(d[30:] for d in again) == [d[30:] for d in expected]


async def test_readers_get_back_what_the_hash_leaves_out(client: Redis) -> None:
    scripts = Scripts(client)
    events, store = EventStore(client, scripts), DeliveryStore(client, scripts)
    endpoint_id = await _endpoint(scripts, NOW)
    event_id = new_id("msg", NOW)
    ids = sorted(await _accept(events, event_id, NOW))
    (short,) = ids

    raw = await client.hgetall(keys.delivery(short))
    assert not {"event", "type", "created", "endpoint"} & set(raw)
    assert "created" not in await client.hgetall(keys.event(event_id))
    event = await events.get(event_id)
    assert event is not None and event.created_ms == NOW and sorted(event.delivery_ids) == ids

    records = await store.get_many([*ids, "dlv_missing"])
    assert [(r.id, r.event_id, r.endpoint_id, r.event_type, r.created_ms) for r in records] == [
        (short, event_id, endpoint_id, TYPE, NOW),
    ]
    assert [await store.get(d) for d in ids] == records

    # A clock reading other than the id's is kept.
    late_event = new_id("msg", NOW + 5)
    (late,) = await _accept(events, late_event, NOW + 7)
    assert (await client.hget(keys.delivery(late), "created")) == str(NOW + 7)
    assert (await client.hget(keys.event(late_event), "created")) == str(NOW + 7)
    record = await store.get(late)
    assert record is not None and record.created_ms == NOW + 7
    late_record = await events.get(late_event)
    assert late_record is not None and late_record.created_ms == NOW + 7

    # A replay's delivery keeps its event and type; its id is short too.
    replayed = await events.replay(event_id, endpoint_id, NOW + 50, 3, 1000, sender=None)
    (replay_id,) = replayed.delivery_ids
    assert len(replay_id) == len(short) and replay_id not in ids
    raw = await client.hgetall(keys.delivery(replay_id))
    assert raw["event"] == event_id and raw["type"] == TYPE and "endpoint" not in raw
    record = await store.get(replay_id)
    assert record is not None
    assert (record.event_id, record.endpoint_id, record.event_type, record.created_ms) == (
        event_id, endpoint_id, TYPE, NOW + 50,
    )  # fmt: skip
    event = await events.get(event_id)
    assert event is not None and sorted(event.delivery_ids) == sorted([*ids, replay_id])

    # An endpoint's deliveries outlive it, and still name it.
    assert await EndpointStore(client, scripts).delete(endpoint_id)
    record = await store.get(short)
    assert record is not None and record.endpoint_id == endpoint_id
