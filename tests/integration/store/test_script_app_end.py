"""app_end.lua through its wrapper (ApplicationDeletion.end_pending, AppEndArgs, AppEnded):
a deleted application's pending deliveries end failed with application_deleted, leased and
parked ones too, each logged to the outbox; another application's, and its own finished
ones, stay as they were; a live application is refused; a scan in slices sees every one."""

from __future__ import annotations

import json
from typing import cast

import pytest
from redis.asyncio import Redis

from tests.integration.store.tenants import app_endpoint, new_app
from tests.support import buckets
from webhook_service.ids import mark_of, new_id
from webhook_service.store import keys
from webhook_service.store.app_deletion import (
    AppEndArgs,
    AppEnded,
    AppEndOutcome,
    ApplicationDeletion,
)
from webhook_service.store.applications import ApplicationStore
from webhook_service.store.deliveries import (
    Attempt,
    AttemptOutcome,
    DeliveryStore,
    HealthPolicy,
    Recorded,
    RecordOutcome,
)
from webhook_service.store.events import EventStore
from webhook_service.store.scripts import Scripts

pytestmark = pytest.mark.integration

NOW = 1_800_000_000_000
TYPE = "script.app_end"
BODY = '{"type":"script.app_end","data":{}}'
TOKEN = "tok-app-end"
LEASE_MS = 30_000


def test_the_args_are_the_application_the_cursor_the_count_and_the_time() -> None:
    assert AppEndArgs("app_1", "17", 500, NOW).argv() == ["app_1", "17", 500, NOW]
    assert AppEnded.parse(["more", "42", 3]) == AppEnded(AppEndOutcome.MORE, "42", 3)


async def _tenant(client: Redis, endpoints: int = 1) -> tuple[str, list[str]]:
    """A new application with ``endpoints`` endpoints subscribed to TYPE."""
    scripts = Scripts(client)
    app_id = await new_app(client, NOW - 100)
    made = [await app_endpoint(scripts, app_id, [TYPE], NOW - 90 + n) for n in range(endpoints)]
    return app_id, made


async def _events(client: Redis, app_id: str, count: int, at: int = NOW) -> list[str]:
    """``count`` events to the application: every delivery they made (pending)."""
    events = EventStore(client, Scripts(client))
    ids: list[str] = []
    for n in range(count):
        accepted = await events.accept(
            event_id=new_id("msg", at + n, mark=mark_of(app_id)), event_type=TYPE, body=BODY,
            key_id="key_1", now_ms=at + n, budget=3, grace_ms=1000, idempotency=None, wakeup=None,
            backlog_max=1_000_000, app_id=app_id,
        )  # fmt: skip
        ids += accepted.delivery_ids
    return ids


async def _end_all(client: Redis, app_id: str, count: int = 1000) -> list[AppEnded]:
    """Calls from the start of the due set until a scan is over: each one's answer."""
    deletion = ApplicationDeletion(client, Scripts(client))
    answers: list[AppEnded] = []
    cursor = "0"
    while True:
        answers.append(await deletion.end_pending(AppEndArgs(app_id, cursor, count, NOW + 500)))
        cursor = answers[-1].cursor
        if answers[-1].outcome is not AppEndOutcome.MORE:
            return answers


async def _record(store: DeliveryStore, delivery_id: str) -> Recorded:
    """A successful attempt of the delivery leased with TOKEN."""
    return await store.record(
        delivery_id=delivery_id, token=TOKEN, now_ms=NOW + 10,
        attempt=Attempt(1, NOW, 5, 200, None, "answer"), outcome=AttemptOutcome.OK,
        delay_ms=None, health=HealthPolicy(disable_after_ms=3_600_000, ops_budget=3),
    )  # fmt: skip


async def _endpoint_of(client: Redis, delivery_id: str) -> str:
    """The endpoint a delivery's id names by its tail (keys.py "Derived fields")."""
    return str(await buckets.endpoint_of(client, delivery_id))


async def _hash(client: Redis, key: str) -> dict[str, str]:
    return cast(dict[str, str], await client.hgetall(key))


async def _states(client: Redis) -> dict[str, dict[str, object]]:
    """The delivery state records in the outbox, by delivery id (the last one of each)."""
    entries = await buckets.outbox(client)
    states = [json.loads(f[keys.OutboxField.STATE]) for _, f in entries if "s" in f]
    return {str(s["d"]): s for s in states}


async def test_a_live_application_is_refused_and_nothing_changes(client: Redis) -> None:
    app_id, _ = await _tenant(client)
    (delivery_id,) = await _events(client, app_id, 1)
    outbox = await buckets.outbox_length(client)

    (answer,) = await _end_all(client, app_id)

    assert answer == AppEnded(AppEndOutcome.EXISTS, "0", 0)
    assert (await _hash(client, keys.delivery(delivery_id)))["status"] == "pending"
    assert await client.zscore(keys.due(keys.bucket_of(delivery_id)), delivery_id) is not None
    assert await buckets.outbox_length(client) == outbox


async def test_every_pending_delivery_of_the_deleted_application_ends(client: Redis) -> None:
    app_id, (first, second) = await _tenant(client, endpoints=2)
    other_app, (other_ep,) = await _tenant(client)
    mine = await _events(client, app_id, 3)
    others = await _events(client, other_app, 2)
    store = DeliveryStore(client, Scripts(client))
    # One leased (a worker is sending it now), one finished already, one parked behind its
    # endpoint's limit, the rest waiting for a worker.
    leased, done, parked = mine[0], mine[2], mine[4]
    taken = await store.lease([leased, done], TOKEN, NOW, LEASE_MS, 10)
    assert [j.delivery_id for j in taken.jobs] == [leased, done]
    assert (await _record(store, done)).status is RecordOutcome.SUCCEEDED
    parked_at = keys.parked(await _endpoint_of(client, parked))
    await client.zadd(parked_at, {parked: NOW})
    pending = [d for d in mine if d != done]
    assert sum([int(await client.get(keys.backlog(ep)) or 0) for ep in (first, second)]) == 5
    assert await ApplicationStore(client, Scripts(client)).delete(app_id)

    answers = await _end_all(client, app_id)

    assert [a.outcome for a in answers] == [AppEndOutcome.SCANNED]
    assert answers[0].ended == len(pending) == 5
    states = await _states(client)
    for delivery_id in pending:
        row = await _hash(client, keys.delivery(delivery_id))
        assert (row["status"], row["error"], row["updated"]) == (
            "failed", "application_deleted", str(NOW + 500),
        )  # fmt: skip
        # Nothing dead is kept: no lease, no next time, no budget.
        assert not {"lease", "lease_until", "next_at", "budget"} & row.keys()
        assert await client.zscore(keys.due(keys.bucket_of(delivery_id)), delivery_id) is None
        assert states[delivery_id]["s"] == "failed"
        assert states[delivery_id]["e"] == "application_deleted"
    assert not await client.exists(parked_at)
    assert (await _hash(client, keys.delivery(done)))["status"] == "succeeded"
    assert states[done]["s"] == "succeeded"
    # Each endpoint's backlog counts its pending ones down to none.
    assert [await client.get(keys.backlog(ep)) for ep in (first, second)] == ["0", "0"]
    assert (await buckets.metrics(client)).get("outcome:failed", 0) == 5
    # The other application's deliveries are untouched.
    for delivery_id in others:
        assert (await _hash(client, keys.delivery(delivery_id)))["status"] == "pending"
        assert await client.zscore(keys.due(keys.bucket_of(delivery_id)), delivery_id) is not None
        assert delivery_id not in states
    assert await client.get(keys.backlog(other_ep)) == "2"

    # The attempt under way when its delivery ended is recorded as nothing: stale.
    assert (await _record(store, leased)).status is RecordOutcome.STALE
    assert (await _hash(client, keys.delivery(leased)))["status"] == "failed"

    # A second scan finds nothing left to end.
    outbox = await buckets.outbox_length(client)
    assert [a.ended for a in await _end_all(client, app_id)] == [0]
    assert await buckets.outbox_length(client) == outbox


async def test_a_scan_in_slices_goes_round_the_whole_due_set(client: Redis) -> None:
    app_id, _ = await _tenant(client, endpoints=3)
    other_app, _ = await _tenant(client, endpoints=2)
    # Past the size a sorted set is kept compact at (128), so ZSCAN answers in slices.
    mine = await _events(client, app_id, 60)
    others = await _events(client, other_app, 60, at=NOW + 1000)
    assert await ApplicationStore(client, Scripts(client)).delete(app_id)

    answers = await _end_all(client, app_id, count=20)

    assert len(answers) > 3
    assert [a.outcome for a in answers[:-1]] == [AppEndOutcome.MORE] * (len(answers) - 1)
    assert answers[-1].outcome is AppEndOutcome.SCANNED
    assert sum(a.ended for a in answers) == len(mine) == 180
    statuses = {d: (await _hash(client, keys.delivery(d)))["status"] for d in mine + others}
    assert {statuses[d] for d in mine} == {"failed"}
    assert {statuses[d] for d in others} == {"pending"}
    assert len(await buckets.due(client)) == len(others)


async def test_an_application_without_endpoints_ends_nothing(client: Redis) -> None:
    app_id = await new_app(client, NOW)
    other_app, _ = await _tenant(client)
    others = await _events(client, other_app, 2)
    assert await ApplicationStore(client, Scripts(client)).delete(app_id)

    assert await _end_all(client, app_id) == [AppEnded(AppEndOutcome.SCANNED, "0", 0)]
    assert len(await buckets.due(client)) == len(others)


async def test_a_delivery_named_by_its_endpoints_id_body_ends_too(client: Redis) -> None:
    # Schema 2 ended a delivery id with its endpoint's id body (history/backfill.py maps
    # those tails in endpoints:seqs); one may still be pending after the migration.
    app_id, (endpoint_id,) = await _tenant(client)
    old = "dlv_" + new_id("msg", NOW, mark=mark_of(app_id))[4:] + endpoint_id[3:]
    await client.hset(keys.delivery(old), mapping={"status": "pending", "attempts": 0})
    await client.zadd(keys.due(keys.bucket_of(old)), {old: NOW})
    assert await ApplicationStore(client, Scripts(client)).delete(app_id)

    assert [a.ended for a in await _end_all(client, app_id)] == [1]
    assert (await _hash(client, keys.delivery(old)))["error"] == "application_deleted"
