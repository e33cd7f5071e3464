"""replay.lua through its wrapper (EventStore.replay, ReplayArgs, Replayed): every answer it
gives, the typed reply, and what it left in Redis; a replay stays within the event's
application and its channels."""

from __future__ import annotations

import json
from typing import cast

import pytest
from redis.asyncio import Redis

from tests.integration.conftest import save_endpoint
from tests.integration.store.tenants import app_endpoint, new_app
from tests.support import buckets
from webhook_service.ids import event_deliveries, mark_of, new_id
from webhook_service.store import keys
from webhook_service.store.applications import DEFAULT_APP_ID
from webhook_service.store.events import EventStore, ReplayArgs, Replayed, ReplayOutcome
from webhook_service.store.scripts import Scripts

pytestmark = pytest.mark.integration

NOW = 1_800_000_000_000
TYPE = "script.replay"
GRACE_MS = 1000


async def _event(
    client: Redis,
    key_id: str = "key_1",
    *,
    app_id: str = DEFAULT_APP_ID,
    channels: tuple[str, ...] = (),
) -> str:
    event_id = new_id("msg", NOW, mark=mark_of(app_id))
    accepted = await EventStore(client, Scripts(client)).accept(
        event_id=event_id, event_type=TYPE, body="{}", key_id=key_id, now_ms=NOW, budget=3,
        grace_ms=GRACE_MS, idempotency=None, wakeup=None, backlog_max=1_000_000,
        app_id=app_id, channels=channels,
    )  # fmt: skip
    return accepted.event_id


async def _replay(
    client: Redis,
    event_id: str,
    endpoint_id: str | None = None,
    sender: str | None = None,
) -> Replayed:
    return await EventStore(client, Scripts(client)).replay(
        event_id, endpoint_id, NOW + 50, 5, GRACE_MS, sender=sender
    )


async def _reached(client: Redis, replayed: Replayed) -> set[str]:
    """The endpoints of the replay just made, as its log record (the outbox's last) names
    them."""
    assert replayed.outcome is ReplayOutcome.OK
    logged = json.loads((await _outbox(client))[-1][keys.OutboxField.REPLAY])
    assert [row[0] for row in logged["dlv"]] == list(replayed.delivery_ids)
    return {row[1] for row in logged["dlv"]}


def test_the_args_are_in_the_scripts_order() -> None:
    args = ReplayArgs(NOW, "msg_1", "P" * 26, 3, GRACE_MS, None, "key_1")
    assert args.argv() == [NOW, "msg_1", "P" * 26, 3, GRACE_MS, "", "key_1", "", ""]
    assert ReplayArgs(NOW, "msg_1", "P", 3, 0, "ep_1", None).argv()[5:7] == ["ep_1", ""]
    filtered = ReplayArgs(NOW, "msg_1", "P", 3, 0, None, None, 4, ("ep_1", "ep_2"))
    assert filtered.argv()[7:] == [4, '["ep_1","ep_2"]']


async def _hash(client: Redis, key: str) -> dict[str, str]:
    return cast(dict[str, str], await client.hgetall(key))


async def _outbox(client: Redis) -> list[dict[str, str]]:
    """The log outbox's entries, oldest first: their fields."""
    entries = await buckets.outbox(client)
    return [fields for _, fields in entries]


async def test_ok_makes_new_deliveries_to_every_endpoint_subscribed_now(client: Redis) -> None:
    scripts = Scripts(client)
    live = await save_endpoint(scripts, TYPE, NOW - 2)
    disabled = await save_endpoint(scripts, TYPE, NOW - 1)
    event_id = await _event(client)
    originals = event_deliveries(event_id, (await _hash(client, keys.event(event_id)))["dlvs"])
    await client.hset(keys.endpoint(disabled), "disabled", "1")
    later = await save_endpoint(scripts, TYPE, NOW + 10)  # subscribed since: reached too
    outbox = len(await _outbox(client))

    replayed = await _replay(client, event_id, sender="key_1")

    assert replayed.outcome is ReplayOutcome.OK
    assert len(replayed.delivery_ids) == 3 and not set(replayed.delivery_ids) & set(originals)
    assert set(replayed.pending) < set(replayed.delivery_ids) and len(replayed.pending) == 2
    statuses: dict[str, str] = {}
    for delivery_id in replayed.delivery_ids:
        delivery = await _hash(client, keys.delivery(delivery_id))
        assert (delivery["event"], delivery["type"], delivery["budget"]) == (event_id, TYPE, "5")
        statuses[delivery_id] = delivery["status"]
        due = await client.zscore(keys.due(keys.bucket_of(delivery_id)), delivery_id)
        assert due == (NOW + 50 + GRACE_MS if delivery_id in replayed.pending else None)
    assert sorted(statuses.values()) == ["disabled", "pending", "pending"]
    event = await _hash(client, keys.event(event_id))
    assert event["live"] == "5"
    assert sorted(event_deliveries(event_id, event["dlvs"])) == sorted(
        [*originals, *replayed.delivery_ids]
    )
    # The disabled endpoint's one pending delivery is its original, from before it was.
    assert [await client.get(keys.backlog(ep)) for ep in (live, disabled, later)] == [
        "2", "1", "1",
    ]  # fmt: skip
    (record,) = (await _outbox(client))[outbox:]
    logged = json.loads(record[keys.OutboxField.REPLAY])
    assert (logged["ev"], logged["type"], logged["t"], logged["app"]) == (
        event_id, TYPE, NOW + 50, DEFAULT_APP_ID,
    )  # fmt: skip
    assert {row[1]: row[2] for row in logged["dlv"]} == {
        live: "pending", disabled: "disabled", later: "pending",
    }  # fmt: skip


async def test_ok_to_one_endpoint(client: Redis) -> None:
    scripts = Scripts(client)
    await save_endpoint(scripts, TYPE, NOW - 2)
    only = await save_endpoint(scripts, TYPE, NOW - 1)
    event_id = await _event(client)

    replayed = await _replay(client, event_id, only)

    assert replayed.outcome is ReplayOutcome.OK
    assert replayed.pending == replayed.delivery_ids and len(replayed.delivery_ids) == 1
    record = await client.hgetall(keys.delivery(replayed.delivery_ids[0]))
    assert record["status"] == "pending"
    assert await client.get(keys.backlog(only)) == "2"


async def test_ok_with_no_endpoint_subscribed_makes_nothing(client: Redis) -> None:
    event_id = await _event(client)
    outbox = await buckets.outbox_length(client)

    assert await _replay(client, event_id) == Replayed(ReplayOutcome.OK)
    assert await buckets.outbox_length(client) == outbox


async def _refused(client: Redis, replayed: Replayed, outcome: ReplayOutcome, size: int) -> None:
    assert replayed == Replayed(outcome)
    assert await client.dbsize() == size


async def test_missing_no_payload_and_endpoint_refusals_write_nothing(client: Redis) -> None:
    scripts = Scripts(client)
    subscribed = await save_endpoint(scripts, TYPE, NOW - 2)
    other_type = await save_endpoint(scripts, "script.other", NOW - 1)
    event_id = await _event(client)
    size = await client.dbsize()

    await _refused(client, await _replay(client, new_id("msg", NOW)), ReplayOutcome.MISSING, size)
    # Another key's event is as good as none.
    other_key = await _replay(client, event_id, sender="key_2")
    await _refused(client, other_key, ReplayOutcome.MISSING, size)
    no_endpoint = await _replay(client, event_id, new_id("ep", NOW))
    await _refused(client, no_endpoint, ReplayOutcome.NO_ENDPOINT, size)
    not_subscribed = await _replay(client, event_id, other_type)
    await _refused(client, not_subscribed, ReplayOutcome.NOT_SUBSCRIBED, size)
    await client.hset(keys.endpoint(subscribed), "disabled", "1")
    disabled = await _replay(client, event_id, subscribed)
    await _refused(client, disabled, ReplayOutcome.ENDPOINT_DISABLED, size)
    await client.hdel(keys.event(event_id), "body")
    await _refused(client, await _replay(client, event_id), ReplayOutcome.NO_PAYLOAD, size)


async def test_a_replay_stays_within_the_events_application(client: Redis) -> None:
    scripts = Scripts(client)
    first, second = await new_app(client, NOW - 10), await new_app(client, NOW - 9)
    own = await app_endpoint(scripts, first, [TYPE], NOW - 8)
    theirs = await app_endpoint(scripts, second, [TYPE], NOW - 7)
    await save_endpoint(scripts, TYPE, NOW - 6)  # the default application's
    event_id = await _event(client, app_id=first)

    assert await _reached(client, await _replay(client, event_id)) == {own}
    # Another application's endpoint is not there for this event, subscribed or not.
    size = await client.dbsize()
    await _refused(client, await _replay(client, event_id, theirs), ReplayOutcome.NO_ENDPOINT, size)
    assert (await _replay(client, event_id, own)).outcome is ReplayOutcome.OK
    logged = json.loads((await _outbox(client))[-1][keys.OutboxField.REPLAY])
    assert logged["app"] == first


async def test_a_replay_takes_the_events_channels(client: Redis) -> None:
    scripts = Scripts(client)
    app_id = await new_app(client, NOW - 10)
    plain = await app_endpoint(scripts, app_id, [TYPE], NOW - 9)
    on_a = await app_endpoint(scripts, app_id, [TYPE], NOW - 8, ["a"])
    on_b = await app_endpoint(scripts, app_id, None, NOW - 7, ["b"])
    event_id = await _event(client, app_id=app_id, channels=("a",))
    # Kept with the event (only when it has some), as EventStore.get reads them back.
    assert await client.hget(keys.event(event_id), "ch") == '["a"]'
    held = await EventStore(client, scripts).get(event_id)
    assert held is not None and held.channels == ("a",)
    without = await _event(client, app_id=app_id)
    assert not await client.hexists(keys.event(without), "ch")

    assert await _reached(client, await _replay(client, event_id)) == {plain, on_a}
    assert await _reached(client, await _replay(client, without)) == {plain}
    size = await client.dbsize()
    other = await _replay(client, event_id, on_b)
    await _refused(client, other, ReplayOutcome.NOT_SUBSCRIBED, size)
    assert (await _replay(client, event_id, on_a)).outcome is ReplayOutcome.OK
