"""revive.lua through revive(), on a real Valkey: Revival in, a Revived per delivery out
(ok: pending again, present: Redis had it), and what the script restores: the event, named
for release; the delivery pending, due, counted in its endpoint's backlog and logged. How
the log's rows get here is tests/integration/history/test_revive.py's."""

from __future__ import annotations

import orjson
import pytest
from redis.asyncio import Redis

from tests.integration.conftest import save_endpoint
from tests.support import buckets
from webhook_service.ids import delivery_id, new_id
from webhook_service.store import keys
from webhook_service.store.applications import DEFAULT_APP_ID
from webhook_service.store.revive import DeliveryRow, EventRow, Revival, Revived, revive
from webhook_service.store.scripts import Scripts

pytestmark = pytest.mark.integration

NOW, GRACE, HOT = 1_700_000_000_000, 5_000, 60_000
TYPE = "revive.one"


async def _endpoint(client: Redis) -> tuple[str, int]:
    endpoint_id = await save_endpoint(Scripts(client), TYPE, NOW)
    return endpoint_id, int(await client.hget(keys.endpoint(endpoint_id), "seq") or 0)


def test_the_args_are_the_times_then_the_rows_as_json() -> None:
    revival = Revival(
        NOW, GRACE, HOT,
        [
            EventRow("msg_a", TYPE, "key_1", "{}", None, "app_1"),
            EventRow("msg_b", TYPE, "key_1", None, 7),
        ],
        [DeliveryRow("dlv_a", "msg_a", 2)],
    )  # fmt: skip
    assert revival.argv() == [
        NOW, GRACE, HOT,
        '[{"id":"msg_a","type":"revive.one","key":"key_1","app":"app_1","body":"{}"},'
        '{"id":"msg_b","type":"revive.one","key":"key_1","expunged":7}]',
        '[{"id":"dlv_a","event":"msg_a","attempts":2}]',
    ]  # fmt: skip


async def test_an_absent_delivery_is_revived_and_a_present_one_left(client: Redis) -> None:
    endpoint_id, seq = await _endpoint(client)
    event_id = new_id("msg", NOW)
    absent, present = delivery_id(event_id, endpoint_id, seq), delivery_id(event_id, "ep_x", 9)
    await client.hset(keys.delivery(present), mapping={"status": "succeeded", "attempts": 1})
    revival = Revival(
        NOW, GRACE, HOT, [EventRow(event_id, TYPE, "key_1", '{"a":1}', None, DEFAULT_APP_ID)],
        [DeliveryRow(absent, event_id, 1), DeliveryRow(present, event_id, 1)],
    )  # fmt: skip

    assert await revive(Scripts(client), revival) == [Revived.OK, Revived.PRESENT]
    assert await client.hgetall(keys.event(event_id)) == {
        "type": TYPE, "key": "key_1", "app": DEFAULT_APP_ID, "body": '{"a":1}', "dlvs": "",
        "live": "1",
    }  # fmt: skip
    assert await client.zscore(keys.release(0), event_id) == NOW + HOT
    # Its id names its event and endpoint: the hash leaves both out (keys.py).
    assert await client.hgetall(keys.delivery(absent)) == {
        "status": "pending", "attempts": "1", "budget": "2", "next_at": str(NOW),
        "updated": str(NOW),
    }  # fmt: skip
    assert await client.zscore(keys.due(keys.bucket_of(absent)), absent) == NOW + GRACE
    assert await client.get(keys.backlog(endpoint_id)) == "1"
    [(_, entry)] = await buckets.outbox(client)
    assert orjson.loads(entry[keys.OutboxField.STATE]) == {
        "d": absent, "s": "pending", "n": 1, "u": NOW, "na": NOW,
    }  # fmt: skip
    # The present one, and the due set, as they were.
    assert await client.hgetall(keys.delivery(present)) == {"status": "succeeded", "attempts": "1"}
    assert await client.zscore(keys.due(keys.bucket_of(present)), present) is None


async def test_an_event_redis_holds_is_left_and_an_expunged_one_comes_back_bodiless(
    client: Redis,
) -> None:
    scripts = Scripts(client)
    held, expunged = new_id("msg", NOW), new_id("msg", NOW)
    await client.hset(keys.event(held), mapping={"type": TYPE, "key": "key_1", "live": 3})
    events = [
        EventRow(held, TYPE, "key_2", "{}", None, DEFAULT_APP_ID),
        EventRow(expunged, TYPE, "key_1", None, NOW - 1),
    ]
    # No deliveries: an empty reply.
    assert await revive(scripts, Revival(NOW, 0, HOT, events)) == []
    assert await client.hgetall(keys.event(held)) == {"type": TYPE, "key": "key_1", "live": "3"}
    # No application: one of our operational events.
    assert await client.hgetall(keys.event(expunged)) == {
        "type": TYPE, "key": "key_1", "app": "", "dlvs": "", "live": "0",
        "expunged": str(NOW - 1),
    }  # fmt: skip
    assert await client.zrange(keys.release(0), 0, -1) == [expunged]


async def test_a_replays_delivery_names_its_event_and_type(client: Redis) -> None:
    endpoint_id, seq = await _endpoint(client)
    event_id = new_id("msg", NOW)
    # A replay's delivery id starts with the replay's own body, not its event's.
    replayed = delivery_id(new_id("msg", NOW), endpoint_id, seq)
    revival = Revival(
        NOW, 0, HOT, [EventRow(event_id, TYPE, "key_1", "{}", None)],
        [DeliveryRow(replayed, event_id, 0)],
    )  # fmt: skip
    assert await revive(Scripts(client), revival) == [Revived.OK]
    assert await client.hmget(keys.delivery(replayed), "event", "type", "budget") == [
        event_id, TYPE, "1",
    ]  # fmt: skip
    assert await client.hget(keys.event(event_id), "live") == "1"
