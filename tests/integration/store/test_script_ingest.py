"""ingest.lua through its wrapper (EventStore.accept, IngestArgs, Accepted): every answer it
gives, the typed reply, and what it left in Redis; fan-out within the event's application,
by type and channels."""

from __future__ import annotations

import json
from typing import Literal, cast

import pytest
from redis.asyncio import Redis

from tests.integration.conftest import save_endpoint
from tests.integration.store.tenants import app_endpoint, new_app
from tests.support import buckets
from webhook_service.ids import mark_of, new_id
from webhook_service.store import keys
from webhook_service.store.applications import (
    DEFAULT_APP_ID,
    DEFAULT_APP_UID,
    ApplicationStore,
    NewApplication,
    new_app_id,
)
from webhook_service.store.events import (
    Accepted,
    EventStore,
    IdempotencyClaim,
    IngestArgs,
    IngestOutcome,
    InlineWakeup,
)
from webhook_service.store.scripts import Scripts

pytestmark = pytest.mark.integration

NOW = 1_800_000_000_000
TYPE = "script.ingest"
GRACE_MS = 1000
BODY = '{"type":"script.ingest","data":{}}'


def _claim(
    fingerprint: str = "fp-1",
    state: Literal["done", "in_flight"] = "done",
    until_ms: int = NOW + 10_000,
) -> IdempotencyClaim:
    return IdempotencyClaim("key_1", "order-1", fingerprint, 60, state, until_ms)


async def _accept(
    client: Redis,
    now: int = NOW,
    *,
    idempotency: IdempotencyClaim | None = None,
    wakeup: InlineWakeup | None = None,
    backlog_max: int = 1_000_000,
    app_id: str = DEFAULT_APP_ID,
    channels: tuple[str, ...] = (),
    create_app: NewApplication | None = None,
) -> Accepted:
    return await EventStore(client, Scripts(client)).accept(
        event_id=new_id("msg", now, mark=mark_of(app_id)), event_type=TYPE, body=BODY,
        key_id="key_1", now_ms=now, budget=3, grace_ms=GRACE_MS, idempotency=idempotency,
        wakeup=wakeup, backlog_max=backlog_max, app_id=app_id, channels=channels,
        create_app=create_app,
    )  # fmt: skip


async def _reached(client: Redis, accepted: Accepted) -> set[str]:
    """The endpoints the event's deliveries go to, as its log record names them."""
    assert accepted.outcome is IngestOutcome.CREATED
    for record in await _outbox(client):
        logged = json.loads(record.get(keys.OutboxField.EVENT, "{}"))
        if logged.get("id") == accepted.event_id:
            return {row[1] for row in logged["dlv"]}
    raise AssertionError(f"no log record of {accepted.event_id}")


async def _outbox(client: Redis) -> list[dict[str, str]]:
    """The log outbox's entries, oldest first: their fields."""
    entries = await buckets.outbox(client)
    return [fields for _, fields in entries]


async def test_created_fans_out_to_every_subscribed_endpoint(client: Redis) -> None:
    scripts = Scripts(client)
    first, second = (
        await save_endpoint(scripts, TYPE, NOW - 2),
        await save_endpoint(scripts, TYPE, NOW - 1),
    )
    await save_endpoint(scripts, "script.other", NOW - 1)  # another type's: not reached

    accepted = await _accept(client)

    assert accepted.outcome is IngestOutcome.CREATED
    assert (accepted.event_type, accepted.created_ms, accepted.fanout) == (TYPE, NOW, 2)
    assert len(accepted.delivery_ids) == 2 and not accepted.woken
    event = await client.hgetall(keys.event(accepted.event_id))
    assert (event["type"], event["body"], event["key"], event["app"], event["live"]) == (
        TYPE, BODY, "key_1", DEFAULT_APP_ID, "2",
    )  # fmt: skip
    for delivery_id in accepted.delivery_ids:
        delivery = await client.hgetall(keys.delivery(delivery_id))
        assert (delivery["status"], delivery["attempts"], delivery["budget"]) == (
            "pending", "0", "3",
        )  # fmt: skip
        assert (
            await client.zscore(keys.due(keys.bucket_of(delivery_id)), delivery_id)
            == NOW + GRACE_MS
        )
    assert [await client.get(keys.backlog(ep)) for ep in (first, second)] == ["1", "1"]
    assert await client.hget(keys.metrics(0), "events_accepted") == "1"
    (record,) = await _outbox(client)
    assert record[keys.OutboxField.BODY] == BODY
    logged = json.loads(record[keys.OutboxField.EVENT])
    assert (logged["id"], logged["type"], logged["t"], logged["key"], logged["app"]) == (
        accepted.event_id, TYPE, NOW, "key_1", DEFAULT_APP_ID,
    )  # fmt: skip
    assert "idem" not in logged and "ch" not in logged
    assert sorted(row[1] for row in logged["dlv"]) == sorted([first, second])


async def test_created_with_an_idempotency_key_keeps_its_record(client: Redis) -> None:
    await save_endpoint(Scripts(client), TYPE, NOW - 1)
    claim = _claim()

    accepted = await _accept(client, idempotency=claim)

    assert (accepted.outcome, accepted.fanout, len(accepted.delivery_ids)) == (
        IngestOutcome.CREATED, 1, 1,
    )  # fmt: skip
    record_key = keys.idempotency(DEFAULT_APP_ID, claim.key_id, claim.key)
    assert await client.hgetall(record_key) == {
        "hash": "fp-1", "state": "done", "event": accepted.event_id,
        "until": str(NOW + 10_000), "fanout": "1",
    }  # fmt: skip
    assert 0 < await client.ttl(record_key) <= 60
    (record,) = await _outbox(client)
    assert json.loads(record[keys.OutboxField.EVENT])["idem"] == "order-1"


async def test_a_repeat_is_answered_from_the_record_and_stores_nothing(client: Redis) -> None:
    scripts = Scripts(client)
    await save_endpoint(scripts, TYPE, NOW - 2)
    await save_endpoint(scripts, TYPE, NOW - 1)
    first = await _accept(client, idempotency=_claim())
    size, outbox = await client.dbsize(), len(await _outbox(client))

    repeat = await _accept(client, NOW + 5, idempotency=_claim())

    assert repeat == Accepted(IngestOutcome.REPLAY, first.event_id, TYPE, NOW, (), 2)
    assert (await client.dbsize(), len(await _outbox(client))) == (size, outbox)


async def test_a_repeat_with_another_body_is_a_mismatch(client: Redis) -> None:
    await _accept(client, idempotency=_claim())
    size = await client.dbsize()

    repeat = await _accept(client, NOW + 5, idempotency=_claim(fingerprint="fp-2"))

    assert repeat == Accepted(IngestOutcome.MISMATCH)
    assert await client.dbsize() == size


async def test_a_repeat_while_the_first_is_in_flight_waits_for_it(client: Redis) -> None:
    claim = _claim(state="in_flight", until_ms=NOW + 100)
    first = await _accept(client, idempotency=claim)
    record_key = keys.idempotency(DEFAULT_APP_ID, claim.key_id, claim.key)
    assert await client.hget(record_key, "state") == "in_flight"

    assert await _accept(client, NOW + 99, idempotency=claim) == Accepted(IngestOutcome.IN_FLIGHT)
    # Past `until` the first request is taken to have ended: its answer is replayed.
    late = await _accept(client, NOW + 101, idempotency=claim)
    assert (late.outcome, late.event_id) == (IngestOutcome.REPLAY, first.event_id)


async def test_a_full_outbox_refuses_before_writing(client: Redis) -> None:
    await save_endpoint(Scripts(client), TYPE, NOW - 1)
    await _accept(client)
    await _accept(client, NOW + 1)
    size = await client.dbsize()
    outbox = len(await _outbox(client))
    assert outbox == 2

    refused = await _accept(client, NOW + 2, idempotency=_claim(), backlog_max=outbox)

    assert refused == Accepted(IngestOutcome.BACKLOG_FULL)
    assert (await client.dbsize(), len(await _outbox(client))) == (size, outbox)
    assert await client.hget(keys.metrics(0), "events_accepted") == "2"
    # One record fewer and it is taken.
    created = await _accept(client, NOW + 3, backlog_max=outbox + 1)
    assert created.outcome is IngestOutcome.CREATED


async def test_a_disabled_endpoints_delivery_is_kept_but_not_pending(client: Redis) -> None:
    scripts = Scripts(client)
    live = await save_endpoint(scripts, TYPE, NOW - 2)
    disabled = await save_endpoint(scripts, TYPE, NOW - 1)
    await client.hset(keys.endpoint(disabled), "disabled", "1")

    accepted = await _accept(client)

    assert (accepted.outcome, accepted.fanout, len(accepted.delivery_ids)) == (
        IngestOutcome.CREATED, 2, 1,
    )  # fmt: skip
    (pending,) = accepted.delivery_ids
    logged = json.loads((await _outbox(client))[0][keys.OutboxField.EVENT])
    statuses = {row[1]: (row[0], row[2]) for row in logged["dlv"]}
    assert statuses[live] == (pending, "pending")
    kept, status = statuses[disabled]
    assert status == "disabled"
    assert await client.hget(keys.delivery(kept), "status") == "disabled"
    assert await client.zscore(keys.due(keys.bucket_of(kept)), kept) is None
    assert await client.get(keys.backlog(disabled)) is None


async def test_an_inline_wakeup_is_queued_with_the_event(client: Redis) -> None:
    await save_endpoint(Scripts(client), TYPE, NOW - 1)
    queue = "test.script.ingest"

    accepted = await _accept(client, wakeup=InlineWakeup(queue, "#TASK# #IDS#", 10))

    assert accepted.outcome is IngestOutcome.CREATED and accepted.woken
    (pending,) = accepted.delivery_ids
    (message,) = cast(list[str], await client.lrange(queue, 0, -1))
    assert message.startswith(f"{accepted.event_id}.1 {pending}")
    assert await client.hget(keys.wakeup(0, queue), "task") == f"{accepted.event_id}.1"


def test_an_application_to_create_must_be_the_events() -> None:
    with pytest.raises(ValueError, match="is not app_id"):
        IngestArgs(
            NOW, "msg_1", TYPE, BODY, "key_1", 3, GRACE_MS, None, None, 10, "app_1", (),
            NewApplication("app_2", None, "other"),
        )  # fmt: skip


async def test_the_default_application_is_made_by_its_first_event(client: Redis) -> None:
    accepted = await _accept(client)

    assert (accepted.outcome, accepted.fanout) == (IngestOutcome.CREATED, 0)
    made = await ApplicationStore(client, Scripts(client)).get(DEFAULT_APP_ID)
    assert made is not None and (made.uid, made.created_ms) == (DEFAULT_APP_UID, NOW)
    assert await client.hget(keys.apps_uid(DEFAULT_APP_UID), DEFAULT_APP_UID) == DEFAULT_APP_ID
    again = await _accept(client, NOW + 1)
    assert again.outcome is IngestOutcome.CREATED
    assert await ApplicationStore(client, Scripts(client)).get(DEFAULT_APP_ID) == made


async def test_no_app_when_the_application_is_missing_and_none_is_made(client: Redis) -> None:
    missing = new_id("app", NOW)

    assert await _accept(client, app_id=missing, idempotency=_claim()) == Accepted(
        IngestOutcome.NO_APP
    )
    assert await client.dbsize() == 0


async def test_an_application_to_create_is_made_in_the_same_step(client: Redis) -> None:
    app_id = new_app_id(NOW, "acme")  # of its uid's bucket: one step makes both
    new = NewApplication(app_id, "acme", "Acme")

    accepted = await _accept(client, app_id=app_id, create_app=new, idempotency=_claim())

    assert accepted.outcome is IngestOutcome.CREATED
    made = await ApplicationStore(client, Scripts(client)).resolve("acme")
    assert made is not None
    assert (made.id, made.name, made.metadata, made.rate_limit, made.created_ms) == (
        app_id, "Acme", {}, None, NOW,
    )  # fmt: skip
    assert await client.hget(keys.event(accepted.event_id), "app") == app_id
    assert await client.exists(keys.idempotency(app_id, "key_1", "order-1"))
    # Once it exists it is used as it is, whatever the next event would have named it.
    renamed = NewApplication(app_id, None, "Other")
    assert (await _accept(client, NOW + 1, app_id=app_id, create_app=renamed)).outcome is (
        IngestOutcome.CREATED
    )
    assert await ApplicationStore(client, Scripts(client)).get(app_id) == made


async def test_an_application_whose_uid_was_taken_meanwhile_is_no_app(client: Redis) -> None:
    holder = await new_app(client, NOW, uid="acme")
    size = await client.dbsize()
    raced = new_app_id(NOW + 1, "acme")

    refused = await _accept(
        client, app_id=raced, create_app=NewApplication(raced, "acme", "Acme"),
        idempotency=_claim(),
    )  # fmt: skip

    assert refused == Accepted(IngestOutcome.NO_APP)
    assert await client.dbsize() == size and not await client.exists(keys.app(raced))
    assert await client.hget(keys.apps_uid("acme"), "acme") == holder


async def test_two_applications_with_one_type_never_reach_each_others_endpoints(
    client: Redis,
) -> None:
    scripts = Scripts(client)
    first, second = await new_app(client, NOW - 10), await new_app(client, NOW - 9)
    typed, every = (
        await app_endpoint(scripts, first, [TYPE], NOW - 8),
        await app_endpoint(scripts, first, None, NOW - 7),
    )
    seconds = {
        await app_endpoint(scripts, second, [TYPE], NOW - 6),
        await app_endpoint(scripts, second, None, NOW - 5),
    }
    defaults = {await save_endpoint(scripts, TYPE, NOW - 4)}

    assert await _reached(client, await _accept(client, app_id=first)) == {typed, every}
    assert await _reached(client, await _accept(client, NOW + 1, app_id=second)) == seconds
    assert await _reached(client, await _accept(client, NOW + 2)) == defaults
    assert await client.smembers(keys.sub_type(first, TYPE)) == {typed}
    assert await client.smembers(keys.sub_all(first)) == {every}


async def test_channels_narrow_the_fan_out(client: Redis) -> None:
    scripts = Scripts(client)
    app_id = await new_app(client, NOW - 10)
    plain = await app_endpoint(scripts, app_id, [TYPE], NOW - 9)
    on_a = await app_endpoint(scripts, app_id, [TYPE], NOW - 8, ["a"])
    on_bc = await app_endpoint(scripts, app_id, None, NOW - 7, ["b", "c"])

    # An endpoint without channels takes every event; one with channels only an event
    # sharing one of them, so an event without channels reaches only the former.
    assert await _reached(client, await _accept(client, app_id=app_id)) == {plain}
    with_a = await _accept(client, NOW + 1, app_id=app_id, channels=("a",))
    assert await _reached(client, with_a) == {plain, on_a}
    with_cz = await _accept(client, NOW + 2, app_id=app_id, channels=("z", "c"))
    assert await _reached(client, with_cz) == {plain, on_bc}
    every = await _accept(client, NOW + 3, app_id=app_id, channels=("c", "a", "a"))
    assert await _reached(client, every) == {plain, on_a, on_bc}
    assert every.fanout == 3
    assert await client.hget(keys.event(every.event_id), "live") == "3"
    none = await _accept(client, NOW + 4, app_id=app_id, channels=("z",))
    assert (await _reached(client, none), none.fanout) == ({plain}, 1)

    logged = [json.loads(r[keys.OutboxField.EVENT]) for r in await _outbox(client)]
    assert [e.get("ch") for e in logged] == [None, ["a"], ["c", "z"], ["a", "c"], ["z"]]
    # The log has them; Redis lets them go.
    assert not await client.hexists(keys.event(every.event_id), "channels")


async def test_one_idempotency_key_in_two_applications_stores_two_events(
    client: Redis,
) -> None:
    scripts = Scripts(client)
    first, second = await new_app(client, NOW - 10), await new_app(client, NOW - 9)
    await app_endpoint(scripts, first, [TYPE], NOW - 8)

    one = await _accept(client, app_id=first, idempotency=_claim())
    two = await _accept(client, NOW + 1, app_id=second, idempotency=_claim())
    repeat = await _accept(client, NOW + 2, app_id=first, idempotency=_claim())

    assert (one.outcome, two.outcome) == (IngestOutcome.CREATED, IngestOutcome.CREATED)
    assert one.event_id != two.event_id and (one.fanout, two.fanout) == (1, 0)
    assert (repeat.outcome, repeat.event_id) == (IngestOutcome.REPLAY, one.event_id)
    for app_id, accepted in ((first, one), (second, two)):
        record = keys.idempotency(app_id, "key_1", "order-1")
        assert await client.hget(record, "event") == accepted.event_id


async def test_an_applications_rate_limit_throttles_its_events_alone(client: Redis) -> None:
    limited = await new_app(client, NOW - 10, rate_limit=2.0)
    free = await new_app(client, NOW - 9)

    # A burst of one second's worth, then one every 1/rate s.
    first = await _accept(client, app_id=limited, idempotency=_claim())
    second = await _accept(client, NOW + 1, app_id=limited)
    assert (first.outcome, second.outcome) == (IngestOutcome.CREATED, IngestOutcome.CREATED)
    size, outbox = await client.dbsize(), len(await _outbox(client))

    throttled = await _accept(client, NOW + 2, app_id=limited)

    assert throttled == Accepted(IngestOutcome.THROTTLED, retry_after_ms=498)
    assert (await client.dbsize(), len(await _outbox(client))) == (size, outbox)
    # A repeat is answered from its record, never throttled; another application is not
    # held back.
    repeat = await _accept(client, NOW + 3, app_id=limited, idempotency=_claim())
    assert (repeat.outcome, repeat.event_id) == (IngestOutcome.REPLAY, first.event_id)
    assert (await _accept(client, NOW + 3, app_id=free)).outcome is IngestOutcome.CREATED
    assert await client.exists(keys.app_limit(limited))
    later = await _accept(client, NOW + 2 + throttled.retry_after_ms, app_id=limited)
    assert later.outcome is IngestOutcome.CREATED
