"""record.lua through its wrapper (DeliveryStore.record, RecordArgs, Recorded): each outcome
of an attempt, a lease no longer held, the parked deliveries the freed slots (the
endpoint's, the application's) go to, and what each left in Redis."""

from __future__ import annotations

import json
from typing import cast

import pytest
from redis.asyncio import Redis

from tests.integration.conftest import save_endpoint
from tests.integration.store.tenants import app_endpoint, new_app
from tests.support import buckets
from webhook_service.ids import delivery_event, mark_of, new_id
from webhook_service.store import keys
from webhook_service.store.deliveries import (
    Attempt,
    AttemptOutcome,
    DeliveryStore,
    HealthPolicy,
    Job,
    LeaseResult,
    LeaseSkip,
    NextLease,
    Recorded,
    RecordOutcome,
)
from webhook_service.store.endpoints import EndpointRecord, EndpointStore
from webhook_service.store.events import EventStore
from webhook_service.store.scripts import Scripts

pytestmark = pytest.mark.integration

NOW = 1_800_000_000_000
AT = NOW + 100  # when the attempt is recorded
TYPE = "script.record"
BODY = '{"type":"script.record","data":{}}'
TOKEN = "tok-record"
LEASE_MS = 30_000
HEALTH = HealthPolicy(disable_after_ms=3_600_000, ops_budget=3)
# Dead once the attempt is recorded: the lease is over.
LEASE_FIELDS = {"lease", "lease_until"}


async def _endpoint(client: Redis) -> str:
    endpoint_id = await save_endpoint(Scripts(client), TYPE, NOW - 10)
    await client.hset(keys.endpoint(endpoint_id), "secrets", "sealed-secrets")
    return endpoint_id


async def _leased(client: Redis, *, budget: int = 3, count: int = 1) -> list[str]:
    """``count`` deliveries to the one endpoint, of new events, leased together with TOKEN
    (one in flight at most: the rest park)."""
    events = EventStore(client, Scripts(client))
    ids: list[str] = []
    for n in range(count):
        accepted = await events.accept(
            event_id=new_id("msg", NOW + n), event_type=TYPE, body=BODY, key_id="key_1",
            now_ms=NOW + n, budget=budget, grace_ms=1000, idempotency=None, wakeup=None,
            backlog_max=1_000_000,
        )  # fmt: skip
        ids += accepted.delivery_ids
    leased = await DeliveryStore(client, Scripts(client)).lease(ids, TOKEN, NOW + 10, LEASE_MS, 1)
    assert [job.delivery_id for job in leased.jobs] == ids[:1], leased.skipped
    return ids


async def _record(
    client: Redis,
    delivery_id: str,
    outcome: AttemptOutcome,
    code: int | None,
    delay_ms: int | None = None,
    *,
    token: str = TOKEN,
    next_lease: NextLease | None = None,
    app_max: int = 0,
) -> Recorded:
    return await DeliveryStore(client, Scripts(client), app_concurrency=app_max).record(
        delivery_id=delivery_id, token=token, now_ms=AT,
        attempt=Attempt(1, NOW + 10, 25, code, None, "answer"), outcome=outcome,
        delay_ms=delay_ms, health=HEALTH, next_lease=next_lease,
    )  # fmt: skip


async def _hash(client: Redis, key: str) -> dict[str, str]:
    return cast(dict[str, str], await client.hgetall(key))


async def _outbox(client: Redis) -> list[dict[str, str]]:
    """The log outbox's entries, oldest first: their fields."""
    entries = await buckets.outbox(client)
    return [fields for _, fields in entries]


async def _ops_events(client: Redis) -> list[dict[str, object]]:
    """The operational events the outbox holds: their bodies."""
    entries = await _outbox(client)
    made = [json.loads(f[keys.OutboxField.BODY]) for f in entries if keys.OutboxField.EVENT in f]
    return [body for body in made if body["type"] != TYPE]


async def test_ok_succeeds_frees_the_slot_and_clears_the_failing_streak(client: Redis) -> None:
    endpoint_id = await _endpoint(client)
    await client.hset(keys.endpoint(endpoint_id), mapping={"failing_since": NOW - 5})
    (delivery_id,) = await _leased(client)

    recorded = await _record(client, delivery_id, AttemptOutcome.OK, 200)

    assert recorded == Recorded(RecordOutcome.SUCCEEDED, 1, None, NOW)
    delivery = await _hash(client, keys.delivery(delivery_id))
    assert (delivery["status"], delivery["attempts"], delivery["code"], delivery["class"]) == (
        "succeeded", "1", "200", "2xx",
    )  # fmt: skip
    # Finished: no lease, no next time nor budget, no empty error.
    assert not (LEASE_FIELDS | {"next_at", "budget", "error"}) & set(delivery)
    assert await client.zscore(keys.due(keys.bucket_of(delivery_id)), delivery_id) is None
    assert not await client.zcard(keys.inflight(endpoint_id))
    assert await client.get(keys.backlog(endpoint_id)) == "0"
    endpoint = await _hash(client, keys.endpoint(endpoint_id))
    assert "failing_since" not in endpoint and "last_success" not in endpoint
    # The attempt goes to the log with the state it made.
    last = (await _outbox(client))[-1]
    assert json.loads(last[keys.OutboxField.STATE])["s"] == "succeeded"
    assert json.loads(last[keys.OutboxField.ATTEMPT]) == {
        "n": 1, "t": NOW + 10, "d": 25, "c": 200, "b": "answer",
    }  # fmt: skip
    # The worker counts its outcome (store/counts.py), not the script.
    assert await client.hget(keys.metrics(0), "outcome:succeeded") is None


async def test_fail_with_tries_left_stays_pending_until_its_next_try(client: Redis) -> None:
    endpoint_id = await _endpoint(client)
    (delivery_id,) = await _leased(client)

    recorded = await _record(client, delivery_id, AttemptOutcome.FAIL, 503, delay_ms=10_000)

    assert recorded == Recorded(RecordOutcome.PENDING, 1, None, NOW)
    delivery = await _hash(client, keys.delivery(delivery_id))
    assert (delivery["status"], delivery["next_at"], delivery["budget"], delivery["code"]) == (
        "pending", str(AT + 10_000), "3", "503",
    )  # fmt: skip
    assert not LEASE_FIELDS & set(delivery)
    assert await client.zscore(keys.due(keys.bucket_of(delivery_id)), delivery_id) == AT + 10_000
    assert not await client.zcard(keys.inflight(endpoint_id))
    assert await client.get(keys.backlog(endpoint_id)) == "1"  # still pending
    assert await client.hget(keys.endpoint(endpoint_id), "failing_since") == str(AT)
    assert not await _ops_events(client)


@pytest.mark.parametrize(
    ("budget", "delay_ms"),
    [(3, None), (1, 10_000)],
    ids=["no more tries", "budget spent"],
)
async def test_fail_exhausted_fails_and_tells_the_operations_endpoints(
    client: Redis, budget: int, delay_ms: int | None
) -> None:
    endpoint_id = await _endpoint(client)
    (delivery_id,) = await _leased(client, budget=budget)

    recorded = await _record(client, delivery_id, AttemptOutcome.FAIL, 500, delay_ms)

    assert recorded == Recorded(RecordOutcome.FAILED, 1, None, NOW)
    delivery = await _hash(client, keys.delivery(delivery_id))
    assert (delivery["status"], delivery["code"], delivery["class"]) == ("failed", "500", "5xx")
    assert not (LEASE_FIELDS | {"next_at", "budget"}) & set(delivery)
    assert await client.zscore(keys.due(keys.bucket_of(delivery_id)), delivery_id) is None
    assert await client.get(keys.backlog(endpoint_id)) == "0"
    endpoint = await _hash(client, keys.endpoint(endpoint_id))
    # Troubled, but failing for less than disable_after_ms: still enabled.
    assert (endpoint["troubled"], endpoint["disabled"]) == ("1", "0")
    (exhausted,) = await _ops_events(client)
    assert exhausted["type"] == "delivery.exhausted"
    assert exhausted["data"] == {
        "delivery_id": delivery_id, "event_id": delivery_event(delivery_id),
        "endpoint_id": endpoint_id, "event_type": TYPE, "attempts": 1,
        "last_status_code": 500, "last_error": None,
    }  # fmt: skip


async def test_gone_disables_the_delivery_and_its_endpoint(client: Redis) -> None:
    endpoint_id = await _endpoint(client)
    (delivery_id,) = await _leased(client)

    recorded = await _record(client, delivery_id, AttemptOutcome.GONE, 410)

    assert recorded == Recorded(RecordOutcome.DISABLED, 1, None, NOW)
    delivery = await _hash(client, keys.delivery(delivery_id))
    assert (delivery["status"], delivery["code"]) == ("disabled", "410")
    assert await client.zscore(keys.due(keys.bucket_of(delivery_id)), delivery_id) is None
    endpoint = await _hash(client, keys.endpoint(endpoint_id))
    assert (endpoint["disabled"], endpoint["disabled_reason"], endpoint["disabled_at"]) == (
        "1", "gone", str(AT),
    )  # fmt: skip
    (disabled,) = await _ops_events(client)
    assert (disabled["type"], disabled["data"]) == (
        "endpoint.disabled", {"endpoint_id": endpoint_id, "reason": "gone"},
    )  # fmt: skip


async def test_an_operational_event_belongs_to_no_application(client: Redis) -> None:
    scripts = Scripts(client)
    endpoint_id = await _endpoint(client)
    # The operator's endpoint: in the default application, its channels narrow only the
    # application's own events, never ours.
    at = NOW - 5
    operator = EndpointRecord(
        id=new_id("ep", at), url="http://127.0.0.1:9/ops", description="", event_types=[],
        disabled=False, created_ms=at, updated_ms=at, operations=True, channels=["billing"],
    )  # fmt: skip
    await EndpointStore(client, scripts).save(operator, creating=True)
    (delivery_id,) = await _leased(client)

    await _record(client, delivery_id, AttemptOutcome.GONE, 410)

    (entry,) = [e for e in (await _outbox(client))[1:] if keys.OutboxField.EVENT in e]
    logged = json.loads(entry[keys.OutboxField.EVENT])
    assert (logged["type"], logged["app"], "ch" in logged) == ("endpoint.disabled", "", False)
    assert [row[1] for row in logged["dlv"]] == [operator.id]
    event = await _hash(client, keys.event(logged["id"]))
    assert (event["app"], event["key"]) == ("", "system")
    assert endpoint_id not in {row[1] for row in logged["dlv"]}


async def test_stale_when_the_lease_is_not_ours_records_nothing(client: Redis) -> None:
    endpoint_id = await _endpoint(client)
    (delivery_id,) = await _leased(client)
    before = await _hash(client, keys.delivery(delivery_id))
    outbox = len(await _outbox(client))

    recorded = await _record(client, delivery_id, AttemptOutcome.OK, 200, token="tok-other")

    assert recorded == Recorded(RecordOutcome.STALE, 0, None)
    assert await _hash(client, keys.delivery(delivery_id)) == before
    assert await client.zcard(keys.inflight(endpoint_id)) == 1
    assert len(await _outbox(client)) == outbox

    # Ours, once: the record ends the lease, so a second try of it is stale.
    assert (await _record(client, delivery_id, AttemptOutcome.OK, 200)).status is (
        RecordOutcome.SUCCEEDED
    )
    again = await _record(client, delivery_id, AttemptOutcome.OK, 200)
    assert again.status is RecordOutcome.STALE and again.attempts == 0


async def test_the_freed_slot_goes_to_the_parked_delivery_leased_through_next_lease(
    client: Redis,
) -> None:
    endpoint_id = await _endpoint(client)
    sent, parked = await _leased(client, count=2)

    recorded = await _record(
        client, sent, AttemptOutcome.OK, 200, next_lease=NextLease("tok-next", LEASE_MS, 1)
    )

    job = Job(
        parked, 1, delivery_event(parked), endpoint_id, BODY, "http://127.0.0.1:9/x",
        "sealed-secrets", "",
    )  # fmt: skip
    assert recorded == Recorded(RecordOutcome.SUCCEEDED, 1, LeaseResult([job], {}), NOW)
    assert (await _hash(client, keys.delivery(parked)))["lease"] == "tok-next"
    assert not await client.zcard(keys.parked(endpoint_id))
    inflight = keys.inflight(endpoint_id)
    assert await client.zrange(inflight, 0, -1) == [parked]


async def test_without_next_lease_the_parked_delivery_is_left_to_the_scheduler(
    client: Redis,
) -> None:
    endpoint_id = await _endpoint(client)
    sent, parked = await _leased(client, count=2)

    recorded = await _record(client, sent, AttemptOutcome.OK, 200)

    assert recorded == Recorded(RecordOutcome.SUCCEEDED, 1, None, NOW)
    assert not await client.zcard(keys.parked(endpoint_id))
    assert await client.zscore(keys.due(keys.bucket_of(parked)), parked) == AT + 2000
    assert "lease" not in await _hash(client, keys.delivery(parked))


async def test_next_lease_says_why_the_parked_delivery_was_not_leased(client: Redis) -> None:
    await _endpoint(client)
    sent, parked = await _leased(client, count=2)

    # The 410 disables the endpoint before the parked delivery is leased: it is disabled too.
    recorded = await _record(
        client, sent, AttemptOutcome.GONE, 410, next_lease=NextLease("tok-next", LEASE_MS, 1)
    )

    assert recorded == Recorded(
        RecordOutcome.DISABLED, 1, LeaseResult([], {parked: LeaseSkip.DISABLED}), NOW
    )
    assert (await _hash(client, keys.delivery(parked)))["status"] == "disabled"


URL = "http://127.0.0.1:9/x"  # the endpoints' (tenants.app_endpoint's)


async def _tenant(client: Redis, *types: str) -> tuple[str, list[str]]:
    """A new application and its endpoints, one subscribed to each type, in that order."""
    scripts = Scripts(client)
    app_id = await new_app(client, NOW - 30)
    endpoints = []
    for n, event_type in enumerate(types):
        endpoint_id = await app_endpoint(scripts, app_id, [event_type], NOW - 20 + n)
        await client.hset(keys.endpoint(endpoint_id), "secrets", "sealed-secrets")
        endpoints.append(endpoint_id)
    return app_id, endpoints


async def _sent_to(client: Redis, app_id: str, event_type: str, at: int) -> str:
    """The delivery of a new event of the application and of ``event_type``, to the one
    endpoint subscribed to it."""
    accepted = await EventStore(client, Scripts(client)).accept(
        event_id=new_id("msg", at, mark=mark_of(app_id)), event_type=event_type, body=BODY,
        key_id="key_1",
        now_ms=at, budget=3, grace_ms=1000, idempotency=None, wakeup=None,
        backlog_max=1_000_000, app_id=app_id,
    )  # fmt: skip
    (delivery_id,) = accepted.delivery_ids
    return delivery_id


async def _lease_at(
    client: Redis, ids: list[str], at: int, *, max_in_flight: int = 10, app_max: int
) -> LeaseResult:
    store = DeliveryStore(client, Scripts(client), app_concurrency=app_max)
    return await store.lease(ids, TOKEN, at, LEASE_MS, max_in_flight)


def _job(delivery_id: str, endpoint_id: str) -> Job:
    return Job(
        delivery_id, 1, delivery_event(delivery_id), endpoint_id, BODY, URL, "sealed-secrets", ""
    )


async def test_the_freed_application_slot_goes_to_the_applications_longest_waiting_delivery(
    client: Redis,
) -> None:
    app_id, (_first, second, _third) = await _tenant(client, "t.1", "t.2", "t.3")
    sent = await _sent_to(client, app_id, "t.1", NOW)
    waiting = [await _sent_to(client, app_id, "t.2", NOW + 1)]
    waiting.append(await _sent_to(client, app_id, "t.3", NOW + 2))
    assert (await _lease_at(client, [sent], NOW + 10, app_max=1)).jobs
    for n, delivery_id in enumerate(waiting):
        leased = await _lease_at(client, [delivery_id], NOW + 11 + n, app_max=1)
        assert leased.skipped == {delivery_id: LeaseSkip.APP_BUSY}

    recorded = await _record(
        client, sent, AttemptOutcome.OK, 200, next_lease=NextLease("tok-next", LEASE_MS, 10),
        app_max=1,
    )  # fmt: skip

    # Parked on no endpoint: the application's line alone woke it, oldest first.
    assert recorded == Recorded(
        RecordOutcome.SUCCEEDED, 1, LeaseResult([_job(waiting[0], second)], {}), NOW
    )
    assert await client.zrange(keys.app_inflight(app_id), 0, -1) == [waiting[0]]
    assert await client.zrange(keys.app_parked(app_id), 0, -1) == [waiting[1]]
    assert (await _hash(client, keys.delivery(waiting[0])))["lease"] == "tok-next"


async def test_without_next_lease_the_applications_waiting_delivery_goes_to_the_scheduler(
    client: Redis,
) -> None:
    app_id, (_first, _second) = await _tenant(client, "t.1", "t.2")
    sent = await _sent_to(client, app_id, "t.1", NOW)
    waiting = await _sent_to(client, app_id, "t.2", NOW + 1)
    await _lease_at(client, [sent, waiting], NOW + 10, app_max=1)

    recorded = await _record(client, sent, AttemptOutcome.OK, 200, app_max=1)

    assert recorded == Recorded(RecordOutcome.SUCCEEDED, 1, None, NOW)
    assert not await client.exists(keys.app_inflight(app_id), keys.app_parked(app_id))
    assert await client.zscore(keys.due(keys.bucket_of(waiting)), waiting) == AT + 2000
    assert "lease" not in await _hash(client, keys.delivery(waiting))


async def test_the_longer_wait_takes_the_slot_and_the_other_keeps_its_place_in_line(
    client: Redis,
) -> None:
    app_id, (first, _second, _third) = await _tenant(client, "t.1", "t.2", "t.3")
    sent = await _sent_to(client, app_id, "t.1", NOW)
    other = await _sent_to(client, app_id, "t.2", NOW + 1)
    behind_sent = await _sent_to(client, app_id, "t.1", NOW + 2)
    behind_app = await _sent_to(client, app_id, "t.3", NOW + 3)
    # One lease per endpoint, two per application: both full once the first two go.
    assert (
        len((await _lease_at(client, [sent, other], NOW + 10, max_in_flight=1, app_max=2)).jobs)
        == 2
    )
    one = await _lease_at(client, [behind_sent], NOW + 11, max_in_flight=1, app_max=2)
    two = await _lease_at(client, [behind_app], NOW + 12, max_in_flight=1, app_max=2)
    assert (one.skipped, two.skipped) == (
        {behind_sent: LeaseSkip.BUSY}, {behind_app: LeaseSkip.APP_BUSY},
    )  # fmt: skip

    # Frees a slot of the endpoint and one of the application.
    recorded = await _record(
        client, sent, AttemptOutcome.OK, 200, next_lease=NextLease("tok-next", LEASE_MS, 1),
        app_max=2,
    )  # fmt: skip

    assert recorded.next == LeaseResult(
        [_job(behind_sent, first)], {behind_app: LeaseSkip.APP_BUSY}
    )
    # Back in the application's line where it was, not at its end.
    assert await client.zrange(keys.app_parked(app_id), 0, -1, withscores=True) == [
        (behind_app, NOW + 12)
    ]
    assert await client.zrange(keys.app_inflight(app_id), 0, -1) == [other, behind_sent]


async def test_a_waiting_delivery_that_cannot_use_the_slot_hands_it_to_the_next(
    client: Redis,
) -> None:
    app_id, (_first, second, third) = await _tenant(client, "t.1", "t.2", "t.3")
    sent = await _sent_to(client, app_id, "t.1", NOW)
    stuck = await _sent_to(client, app_id, "t.2", NOW + 1)
    next_in_line = await _sent_to(client, app_id, "t.3", NOW + 2)
    await _lease_at(client, [sent], NOW + 10, app_max=1)
    await _lease_at(client, [stuck], NOW + 11, app_max=1)
    await _lease_at(client, [next_in_line], NOW + 12, app_max=1)
    await client.hset(keys.endpoint(second), "disabled", "1")

    recorded = await _record(
        client, sent, AttemptOutcome.OK, 200, next_lease=NextLease("tok-next", LEASE_MS, 10),
        app_max=1,
    )  # fmt: skip

    assert recorded.next == LeaseResult([_job(next_in_line, third)], {stuck: LeaseSkip.DISABLED})
    assert await client.zrange(keys.app_inflight(app_id), 0, -1) == [next_in_line]
    assert not await client.exists(keys.app_parked(app_id))
