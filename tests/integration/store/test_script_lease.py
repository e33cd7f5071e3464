"""lease.lua through its wrapper (DeliveryStore.lease, LeaseArgs, LeaseResult): a job with
everything its send needs, every reason common.lua lease_one skips a delivery (the
application's cap among them), a wake-up's side list of joined ids, and what each left in
Redis."""

from __future__ import annotations

import json
from typing import cast

import pytest
from redis.asyncio import Redis

from tests.integration.conftest import save_endpoint
from tests.integration.store.tenants import app_endpoint, new_app
from webhook_service.ids import mark_of, new_id
from webhook_service.store import keys
from webhook_service.store.applications import DEFAULT_APP_ID
from webhook_service.store.deliveries import DeliveryStore, Job, LeaseResult, LeaseSkip
from webhook_service.store.events import EventStore
from webhook_service.store.scripts import Scripts

pytestmark = pytest.mark.integration

NOW = 1_800_000_000_000
TYPE = "script.lease"
BODY = '{"type":"script.lease","data":{}}'
GRACE_MS = 1000
TOKEN = "tok-lease"
LEASE_MS = 30_000
URL = "http://127.0.0.1:9/x"  # save_endpoint's


async def _endpoint(client: Redis) -> str:
    """One endpoint subscribed to TYPE, with sealed secrets and headers (opaque here)."""
    endpoint_id = await save_endpoint(Scripts(client), TYPE, NOW - 10)
    await client.hset(
        keys.endpoint(endpoint_id),
        mapping={"secrets": "sealed-secrets", "headers": "sealed-headers"},
    )
    return endpoint_id


async def _event(
    client: Redis, at: int = NOW, *, app_id: str = DEFAULT_APP_ID
) -> tuple[str, list[str]]:
    """A new event of TYPE: its id and its (pending) deliveries, one per endpoint."""
    accepted = await EventStore(client, Scripts(client)).accept(
        event_id=new_id("msg", at, mark=mark_of(app_id)), event_type=TYPE, body=BODY,
        key_id="key_1", now_ms=at, budget=3, grace_ms=GRACE_MS, idempotency=None, wakeup=None,
        backlog_max=1_000_000, app_id=app_id,
    )  # fmt: skip
    return accepted.event_id, list(accepted.delivery_ids)


async def _lease(
    client: Redis,
    ids: list[str],
    now: int,
    *,
    token: str = TOKEN,
    max_in_flight: int = 10,
    app_max: int = 0,
) -> LeaseResult:
    store = DeliveryStore(client, Scripts(client), app_concurrency=app_max)
    return await store.lease(ids, token, now, LEASE_MS, max_in_flight)


async def _tenant(client: Redis, endpoints: int) -> str:
    """A new application with ``endpoints`` endpoints subscribed to TYPE: each of its events
    is a delivery to each, so the endpoints' own limits stay out of the way."""
    app_id = await new_app(client, NOW - 20)
    for n in range(endpoints):
        endpoint_id = await app_endpoint(Scripts(client), app_id, [TYPE], NOW - 10 + n)
        await client.hset(keys.endpoint(endpoint_id), "secrets", "sealed-secrets")
    return app_id


async def _delivery(client: Redis, delivery_id: str) -> dict[str, str]:
    return cast(dict[str, str], await client.hgetall(keys.delivery(delivery_id)))


async def _last_state(client: Redis) -> dict[str, object]:
    """The state record the newest log outbox entry holds."""
    ((_, fields),) = cast(
        list[tuple[str, dict[str, str]]], await client.xrevrange(keys.outbox(0), count=1)
    )
    state: dict[str, object] = json.loads(fields[keys.OutboxField.STATE])
    return state


async def test_go_leases_the_delivery_with_everything_its_send_needs(client: Redis) -> None:
    endpoint_id = await _endpoint(client)
    event_id, (delivery_id,) = await _event(client)

    leased = await _lease(client, [delivery_id], NOW + 1)

    assert leased == LeaseResult(
        [Job(delivery_id, 1, event_id, endpoint_id, BODY, URL, "sealed-secrets", "sealed-headers")],
        {},
    )
    until = NOW + 1 + LEASE_MS
    delivery = await _delivery(client, delivery_id)
    assert (delivery["lease"], delivery["lease_until"]) == (TOKEN, str(until))
    assert (delivery["status"], delivery["attempts"]) == ("pending", "0")
    # A worker dying mid-send is woken again at the lease's end.
    assert await client.zscore(keys.due(keys.bucket_of(delivery_id)), delivery_id) == until
    assert await client.zscore(keys.inflight(endpoint_id), delivery_id) == until


async def test_gone_drops_the_due_entry_of_a_delivery_redis_does_not_hold(
    client: Redis,
) -> None:
    await client.zadd(keys.due(0), {"dlv_nothere": NOW})

    leased = await _lease(client, ["dlv_nothere"], NOW + 1)

    assert leased == LeaseResult([], {"dlv_nothere": LeaseSkip.GONE})
    assert await client.zscore(keys.due(0), "dlv_nothere") is None


async def test_done_drops_the_due_entry_of_a_finished_delivery(client: Redis) -> None:
    await _endpoint(client)
    _, (delivery_id,) = await _event(client)
    await client.hset(keys.delivery(delivery_id), "status", "succeeded")

    leased = await _lease(client, [delivery_id], NOW + 1)

    assert leased.skipped == {delivery_id: LeaseSkip.DONE} and not leased.jobs
    assert await client.zscore(keys.due(keys.bucket_of(delivery_id)), delivery_id) is None
    assert "lease" not in await _delivery(client, delivery_id)


async def test_leased_while_another_lease_holds(client: Redis) -> None:
    await _endpoint(client)
    _, (delivery_id,) = await _event(client)
    assert (await _lease(client, [delivery_id], NOW + 1)).jobs

    again = await _lease(client, [delivery_id], NOW + 2, token="tok-other")

    assert again == LeaseResult([], {delivery_id: LeaseSkip.LEASED})
    delivery = await _delivery(client, delivery_id)
    assert (delivery["lease"], delivery["lease_until"]) == (TOKEN, str(NOW + 1 + LEASE_MS))


async def test_early_for_a_wakeup_before_the_delivery_is_due(client: Redis) -> None:
    await _endpoint(client)
    _, (delivery_id,) = await _event(client)

    # More than a second before its next_at (NOW): a stale wake-up for a later try.
    leased = await _lease(client, [delivery_id], NOW - 1001)

    assert leased == LeaseResult([], {delivery_id: LeaseSkip.EARLY})
    assert "lease" not in await _delivery(client, delivery_id)
    assert (
        await client.zscore(keys.due(keys.bucket_of(delivery_id)), delivery_id) == NOW + GRACE_MS
    )  # it will wake it


@pytest.mark.parametrize("lost", ["endpoint", "payload"])
async def test_failed_unsent_when_its_endpoint_or_its_payload_is_gone(
    client: Redis, lost: str
) -> None:
    endpoint_id = await _endpoint(client)
    event_id, (delivery_id,) = await _event(client)
    if lost == "endpoint":
        await client.delete(keys.endpoint(endpoint_id))
    else:
        await client.hdel(keys.event(event_id), "body")

    leased = await _lease(client, [delivery_id], NOW + 1)

    assert leased == LeaseResult([], {delivery_id: LeaseSkip.FAILED})
    delivery = await _delivery(client, delivery_id)
    why = "endpoint_deleted" if lost == "endpoint" else "payload_deleted"
    assert (delivery["status"], delivery["error"], delivery["updated"]) == (
        "failed", why, str(NOW + 1),
    )  # fmt: skip
    assert await client.zscore(keys.due(keys.bucket_of(delivery_id)), delivery_id) is None
    assert await client.hget(keys.metrics(0), "outcome:failed") == "1"
    # The backlog counts an endpoint that is still there.
    assert await client.get(keys.backlog(endpoint_id)) == ("1" if lost == "endpoint" else "0")
    state = await _last_state(client)
    assert (state["d"], state["s"], state["e"]) == (delivery_id, "failed", why)


async def test_disabled_when_its_endpoint_is(client: Redis) -> None:
    endpoint_id = await _endpoint(client)
    _, (delivery_id,) = await _event(client)  # pending: made while the endpoint was enabled
    await client.hset(keys.endpoint(endpoint_id), "disabled", "1")

    leased = await _lease(client, [delivery_id], NOW + 1)

    assert leased == LeaseResult([], {delivery_id: LeaseSkip.DISABLED})
    delivery = await _delivery(client, delivery_id)
    assert (delivery["status"], delivery["updated"]) == ("disabled", str(NOW + 1))
    assert await client.zscore(keys.due(keys.bucket_of(delivery_id)), delivery_id) is None
    assert await client.get(keys.backlog(endpoint_id)) == "0"
    assert await client.hget(keys.metrics(0), "outcome:disabled") == "1"
    assert (await _last_state(client))["s"] == "disabled"


async def test_busy_parks_what_passes_the_endpoints_in_flight_limit(client: Redis) -> None:
    endpoint_id = await _endpoint(client)
    _, (first,) = await _event(client)
    _, (second,) = await _event(client, NOW + 1)

    leased = await _lease(client, [first, second], NOW + 2, max_in_flight=1)

    assert [job.delivery_id for job in leased.jobs] == [first]
    assert leased.skipped == {second: LeaseSkip.BUSY}
    assert await client.zrange(keys.parked(endpoint_id), 0, -1, withscores=True) == [
        (second, NOW + 2)
    ]
    # Should no slot free within a lease, its due entry wakes it.
    assert await client.zscore(keys.due(keys.bucket_of(second)), second) == NOW + 2 + LEASE_MS
    assert "lease" not in await _delivery(client, second)


async def test_throttled_by_the_endpoints_rate_limit(client: Redis) -> None:
    endpoint_id = await _endpoint(client)
    await client.hset(keys.endpoint(endpoint_id), "rate_limit", "1")  # 1/s, bursts of one
    _, (first,) = await _event(client)
    _, (second,) = await _event(client, NOW + 1)

    leased = await _lease(client, [first, second], NOW + 2)

    assert [job.delivery_id for job in leased.jobs] == [first]
    assert leased.skipped == {second: LeaseSkip.THROTTLED}
    # Due again when the limit lets it go.
    assert await client.zscore(keys.due(keys.bucket_of(second)), second) == NOW + 2 + 1000
    assert "lease" not in await _delivery(client, second)


async def test_a_wakeups_marker_leases_the_ids_that_joined_it_and_ends_its_list(
    client: Redis,
) -> None:
    for _ in range(3):
        await _endpoint(client)
    _, (named, *joined) = await _event(client)
    more = keys.wakeup_more("msg_task.1")  # no time id: of bucket 0, as the event is
    await client.rpush(more, *joined)

    leased = await _lease(client, [named, "+msg_task.1"], NOW + 1)

    assert [job.delivery_id for job in leased.jobs] == [named, *joined] and not leased.skipped
    assert not await client.exists(more)
    for delivery_id in (named, *joined):
        assert (await _delivery(client, delivery_id))["lease"] == TOKEN


async def test_app_busy_parks_what_passes_the_applications_in_flight_cap(client: Redis) -> None:
    app_id = await _tenant(client, 3)
    _, deliveries = await _event(client, app_id=app_id)

    leased = await _lease(client, deliveries, NOW + 1, app_max=2)

    sent, waiting = deliveries[:2], deliveries[2]
    assert [job.delivery_id for job in leased.jobs] == sent
    assert leased.skipped == {waiting: LeaseSkip.APP_BUSY}
    until = NOW + 1 + LEASE_MS
    assert await client.zrange(keys.app_inflight(app_id), 0, -1, withscores=True) == [
        (d, until) for d in sorted(sent)
    ]
    assert await client.zrange(keys.app_parked(app_id), 0, -1, withscores=True) == [
        (waiting, NOW + 1)
    ]
    # Should no slot free within a lease, its due entry wakes it; its endpoint had room, so
    # it waits in the application's line alone.
    assert await client.zscore(keys.due(keys.bucket_of(waiting)), waiting) == until
    assert "lease" not in await _delivery(client, waiting)
    assert not await client.exists(keys.parked(leased.jobs[0].endpoint_id))

    # Another application's deliveries are not held back by this one's.
    other = await _tenant(client, 1)
    _, (theirs,) = await _event(client, NOW + 2, app_id=other)
    assert [
        job.delivery_id for job in (await _lease(client, [theirs], NOW + 3, app_max=2)).jobs
    ] == [theirs]


async def test_an_expired_lease_holds_no_application_slot(client: Redis) -> None:
    app_id = await _tenant(client, 2)
    _, (first, second) = await _event(client, app_id=app_id)
    assert (await _lease(client, [first], NOW + 1, app_max=1)).jobs
    # Its worker died mid-send: nothing records it, its lease runs out.
    after = NOW + 1 + LEASE_MS + 1

    leased = await _lease(client, [second], after, app_max=1)

    assert [job.delivery_id for job in leased.jobs] == [second] and not leased.skipped
    assert await client.zrange(keys.app_inflight(app_id), 0, -1) == [second]


async def test_a_delivery_leased_from_the_applications_line_leaves_it(client: Redis) -> None:
    app_id = await _tenant(client, 2)
    _, (first, second) = await _event(client, app_id=app_id)
    await _lease(client, [first, second], NOW + 1, app_max=1)
    assert await client.zrange(keys.app_parked(app_id), 0, -1) == [second]

    # The due entry's fallback, once the first's lease ran out.
    leased = await _lease(client, [second], NOW + 2 + LEASE_MS, app_max=1)

    assert [job.delivery_id for job in leased.jobs] == [second]
    assert not await client.exists(keys.app_parked(app_id))


@pytest.mark.parametrize("exempt", ["operational event", "default application", "no cap"])
async def test_what_the_application_cap_never_holds_back(client: Redis, exempt: str) -> None:
    app_id = await _tenant(client, 1)
    _, (first,) = await _event(client, app_id=app_id)
    assert (await _lease(client, [first], NOW + 1, app_max=1)).jobs  # the tenant is full
    if exempt == "default application":
        # A single-tenant deployment's every endpoint: only their own limits part them.
        await _endpoint(client)
        _, (other,) = await _event(client, NOW + 2)
    else:
        event_id, (other,) = await _event(client, NOW + 2, app_id=app_id)
        if exempt == "operational event":
            # Ours belong to no application (app ''), whatever endpoint they go to.
            await client.hset(keys.event(event_id), "app", "")

    leased = await _lease(
        client, [other], NOW + 3, token="tok-other", app_max=0 if exempt == "no cap" else 1
    )

    assert [job.delivery_id for job in leased.jobs] == [other]
    # It holds no application's slot.
    assert await client.zrange(keys.app_inflight(app_id), 0, -1) == [first]
    assert not await client.exists(keys.app_inflight(""), keys.app_inflight(DEFAULT_APP_ID))
