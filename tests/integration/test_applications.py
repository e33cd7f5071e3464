"""Applications: one service for many subscribers, each isolated from the others.

Against the real API, Valkey, Celery workers and a receiver that verifies every request
with the endpoint's own secret (standardwebhooks)."""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from redis.asyncio import Redis

from tests.integration.conftest import Api, serve_api, settings_for, wait_for
from tests.support.apikeys import make_key
from tests.support.receiver import Receiver
from tests.support.stack import Stack
from webhook_service.api.routing import NESTED_PREFIX
from webhook_service.api.scopes import Scope
from webhook_service.store import keys
from webhook_service.store.applications import DEFAULT_APP_ID, DEFAULT_APP_UID

TYPES = ("invoice.paid", "invoice.voided", "user.created", "order.shipped")
CHANNELS = ("eu", "us", "vip")
TENANT_SCOPES = [s.value for s in Scope if s is not Scope.ADMIN]


async def new_app(api: Api, name: str, **fields: Any) -> dict[str, Any]:
    status, body, _ = await api.call("POST", "/v1/applications", json={"name": name, **fields})
    assert status == 201, body
    created: dict[str, Any] = body
    return created


async def app_endpoint(
    api: Api,
    receiver: Receiver,
    app: str,
    name: str,
    event_types: list[str] | None = None,
    channels: list[str] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"url": receiver.url(name), "event_types": event_types}
    if channels is not None:
        body["channels"] = channels
    status, created, _ = await api.call("POST", f"/v1/applications/{app}/endpoints", json=body)
    assert status == 201, created
    receiver.secrets.setdefault(name, []).append(created["secret"])
    endpoint: dict[str, Any] = created
    return endpoint


async def app_event(
    api: Api, app: str, event_type: str, data: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    status, body, _ = await api.call(
        "POST", f"/v1/applications/{app}/events", json={"type": event_type, "data": data, **extra}
    )
    assert status == 202, body
    accepted: dict[str, Any] = body
    return accepted


def reaches(endpoint: dict[str, Any], event_type: str, channels: list[str] | None) -> bool:
    """Whether an event of this type and these channels is for this endpoint (issue 16 #3)."""
    types = endpoint["event_types"]
    if types is not None and event_type not in types:
        return False
    wanted = endpoint["channels"]
    return wanted is None or bool(set(wanted) & set(channels or ()))


async def test_application_crud_by_id_and_uid(api: Api) -> None:
    created = await new_app(api, "Acme", uid="acme-crud", metadata={"plan": "gold"})
    assert created["id"].startswith("app_")
    assert created["uid"] == "acme-crud" and created["metadata"] == {"plan": "gold"}
    for ref in (created["id"], "acme-crud"):
        status, body, _ = await api.call("GET", f"/v1/applications/{ref}")
        assert status == 200 and body["id"] == created["id"], body
    status, listed, _ = await api.call("GET", "/v1/applications?uid=acme-crud")
    assert status == 200 and [a["id"] for a in listed["data"]] == [created["id"]]

    status, problem, _ = await api.call(
        "POST", "/v1/applications", json={"name": "Other", "uid": "acme-crud"}
    )
    assert status == 409 and problem["type"].endswith("/uid-taken"), problem
    status, problem, _ = await api.call(
        "POST", "/v1/applications", json={"name": "X", "uid": "app_looks_like_an_id"}
    )
    assert status == 422, problem

    status, patched, _ = await api.call(
        "PATCH", "/v1/applications/acme-crud", json={"name": "Acme Inc", "rate_limit": 50}
    )
    assert status == 200, patched
    assert (patched["name"], patched["uid"], patched["rate_limit"]) == ("Acme Inc", "acme-crud", 50)
    status, _, _ = await api.call("GET", "/v1/applications/no-such-uid")
    assert status == 404


async def test_flat_routes_act_on_the_default_application(api: Api, receiver: Receiver) -> None:
    status, endpoint, _ = await api.call(
        "POST", "/v1/endpoints", json={"url": receiver.url("flat"), "event_types": ["flat.only"]}
    )
    assert status == 201, endpoint
    api.created_endpoints.append(endpoint["id"])
    assert endpoint["application"] == DEFAULT_APP_ID
    status, nested, _ = await api.call(
        "GET", f"/v1/applications/default/endpoints/{endpoint['id']}"
    )
    assert status == 200 and nested["id"] == endpoint["id"], nested
    status, accepted, _ = await api.call(
        "POST", "/v1/events", json={"type": "flat.only", "data": {}}
    )
    assert status == 202 and accepted["application"] == DEFAULT_APP_ID, accepted
    assert accepted["deliveries"] == 1

    # Another application's endpoint is not on the flat routes, and gets nothing of them.
    other = await new_app(api, "Flat other")
    theirs = await app_endpoint(api, receiver, other["id"], "flat-other", ["flat.only"])
    status, _, _ = await api.call("GET", f"/v1/endpoints/{theirs['id']}")
    assert status == 404
    status, accepted, _ = await api.call(
        "POST", "/v1/events", json={"type": "flat.only", "data": {}}
    )
    assert accepted["deliveries"] == 1


async def test_sending_to_a_missing_application_is_404_unless_it_says_how_to_create_it(
    api: Api,
) -> None:
    status, problem, _ = await api.call(
        "POST", "/v1/applications/never-made/events", json={"type": "a.b", "data": {}}
    )
    assert status == 404, problem
    status, problem, _ = await api.call(
        "POST", "/v1/applications/app_01J0000000000000000000000Z/events",
        json={"type": "a.b", "data": {}},
    )  # fmt: skip
    assert status == 404, problem
    accepted = await app_event(api, "made-by-send", "a.b", {}, application={"name": "Made"})
    status, made, _ = await api.call("GET", "/v1/applications/made-by-send")
    assert status == 200 and made["name"] == "Made" and made["id"] == accepted["application"]
    # Once it exists the name is not needed, and a second creation changes nothing.
    again = await app_event(api, "made-by-send", "a.b", {}, application={"name": "Renamed"})
    assert again["application"] == made["id"]
    _, still, _ = await api.call("GET", "/v1/applications/made-by-send")
    assert still["name"] == "Made"


async def test_idempotency_keys_are_scoped_per_application(api: Api) -> None:
    one, two = await new_app(api, "Idem one"), await new_app(api, "Idem two")
    headers = {"Idempotency-Key": "same-key-in-both"}
    ids = []
    for app in (one["id"], two["id"], one["id"]):
        status, body, reply_headers = await api.call(
            "POST", f"/v1/applications/{app}/events",
            json={"type": "a.b", "data": {"n": 1}}, headers=headers,
        )  # fmt: skip
        assert status == 202, body
        ids.append((body["id"], reply_headers.get("Idempotent-Replayed")))
    assert ids[0][0] != ids[1][0], "the same key in two applications is two events"
    assert ids[2] == (ids[0][0], "true"), "the same key again in one application is a replay"


async def test_an_application_rate_limit_holds_it_back_alone(api: Api) -> None:
    slow = await new_app(api, "Slow", rate_limit=1)
    free = await new_app(api, "Free")
    answers = []
    for _ in range(5):
        status, body, headers = await api.call(
            "POST", f"/v1/applications/{slow['id']}/events", json={"type": "a.b", "data": {}}
        )
        answers.append(status)
        if status == 429:
            assert body["type"].endswith("/rate-limited") and int(headers["Retry-After"]) >= 1
    assert answers[0] == 202 and 429 in answers, answers
    for _ in range(5):
        await app_event(api, free["id"], "a.b", {})


async def test_the_endpoint_quota_is_per_application(stack: Stack, receiver: Receiver) -> None:
    settings = settings_for(stack).model_copy(update={"max_endpoints_per_app": 2})
    async with serve_api(settings) as (_, api):
        full, other = await new_app(api, "Full"), await new_app(api, "Not full")
        for n in range(2):
            await app_endpoint(api, receiver, full["id"], f"quota-{n}")
        status, problem, _ = await api.call(
            "POST", f"/v1/applications/{full['id']}/endpoints", json={"url": receiver.url("q")}
        )
        assert status == 422 and problem["type"].endswith("/endpoint-limit-reached"), problem
        assert "2" in problem["detail"]
        await app_endpoint(api, receiver, other["id"], "quota-other")


async def test_operational_endpoints_live_in_the_default_application_only(
    api: Api, receiver: Receiver
) -> None:
    tenant = await new_app(api, "No ops")
    status, problem, _ = await api.call(
        "POST", f"/v1/applications/{tenant['id']}/endpoints",
        json={"url": receiver.url("ops-tenant"), "operations": True},
    )  # fmt: skip
    assert status == 422 and problem["errors"][0]["pointer"] == "/operations", problem


async def test_thirty_applications_each_get_exactly_their_own_events(
    api: Api, receiver: Receiver
) -> None:
    rng = random.Random(16)
    apps = [await new_app(api, f"Tenant {n}", uid=f"iso-{n}") for n in range(30)]
    endpoints: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for app in apps:
        endpoints[app["id"]] = []
        for n in range(rng.randint(1, 3)):
            name = f"{app['uid']}-{n}"
            types = rng.choice([None, sorted(rng.sample(TYPES, rng.randint(1, 3)))])
            channels = rng.choice([None, None, sorted(rng.sample(CHANNELS, rng.randint(1, 2)))])
            made = await app_endpoint(api, receiver, app["id"], name, types, channels)
            assert made["channels"] == channels
            endpoints[app["id"]].append((name, made))

    expected: dict[str, set[str]] = {name: set() for e in endpoints.values() for name, _ in e}
    plan = []
    for n in range(3000):
        app = rng.choice(apps)
        event_type = rng.choice(TYPES)
        channels = rng.choice([None, sorted(rng.sample(CHANNELS, rng.randint(1, 2)))])
        plan.append((app, event_type, channels, n))

    async def send(
        app: dict[str, Any], event_type: str, channels: list[str] | None, n: int
    ) -> None:
        # Half by id, half by uid: both name the same application.
        ref = app["id"] if n % 2 else app["uid"]
        extra = {"channels": channels} if channels else {}
        accepted = await app_event(api, ref, event_type, {"n": n}, **extra)
        assert accepted["application"] == app["id"]
        wanted = [name for name, e in endpoints[app["id"]] if reaches(e, event_type, channels)]
        assert accepted["deliveries"] == len(wanted), (event_type, channels, wanted)
        for name in wanted:
            expected[name].add(accepted["id"])

    for start in range(0, len(plan), 50):
        await asyncio.gather(*(send(*p) for p in plan[start : start + 50]))

    async def all_arrived() -> bool:
        got: dict[str, set[str]] = {name: set() for name in expected}
        for r in receiver.received:
            if r.endpoint in got:
                got[r.endpoint].add(r.webhook_id)
        return all(got[name] >= ids for name, ids in expected.items())

    await wait_for(all_arrived, timeout=180, every=0.5)
    await asyncio.sleep(1)  # anything sent where it should not go has had time to arrive
    for name, ids in expected.items():
        got = receiver.for_endpoint(name)
        assert {r.webhook_id for r in got} == ids, name
        assert all(r.verified for r in got), name
    assert sum(len(ids) for ids in expected.values()) > 1000

    # Each application's history holds its own records only, once the log has them.
    first, second = apps[0], apps[1]
    theirs = {e["id"] for _, e in endpoints[first["id"]]}
    key = (await make_key(api, TENANT_SCOPES, application=first["uid"]))["key"]

    async def logged() -> bool:
        _, page, _ = await api.call("GET", f"/v1/deliveries?application={first['id']}&limit=250")
        return len(page["data"]) == min(
            250, sum(len(expected[n]) for n, _ in endpoints[first["id"]])
        )

    await wait_for(logged, timeout=60)
    _, page, _ = await api.call("GET", f"/v1/deliveries?application={first['id']}&limit=250")
    assert {d["application"] for d in page["data"]} == {first["id"]}
    assert {d["endpoint_id"] for d in page["data"]} <= theirs
    status, events, _ = await api.call("GET", "/v1/events?limit=250", key=key)
    assert status == 200 and events["data"]
    assert {e["application"] for e in events["data"]} == {first["id"]}
    status, _, _ = await api.call("GET", f"/v1/applications/{second['id']}/events", key=key)
    assert status == 404


# ---- a key bound to one application, against every route of another ----------------


@pytest.fixture
async def two_tenants(
    api: Api, receiver: Receiver
) -> AsyncIterator[tuple[dict[str, str], dict[str, str], str]]:
    """Two applications with one of everything each, and a key bound to the first."""
    refs: list[dict[str, str]] = []
    for label in ("mine", "theirs"):
        app = await new_app(api, label, uid=f"bound-{label}")
        endpoint = await app_endpoint(api, receiver, app["id"], f"bound-{label}", ["b.t"])
        event = await app_event(api, app["id"], "b.t", {})

        async def delivered(event_id: str = event["id"]) -> bool:
            status, body, _ = await api.call("GET", f"/v1/events/{event_id}")
            return status == 200 and bool(body["deliveries"])

        await wait_for(delivered)
        _, shown, _ = await api.call("GET", f"/v1/events/{event['id']}")
        status, job, _ = await api.call(
            "POST", f"/v1/applications/{app['id']}/deliveries/retry?status=succeeded"
        )
        assert status == 202, job
        refs.append({
            "app": app["id"], "uid": app["uid"], "endpoint_id": endpoint["id"],
            "event_id": event["id"], "delivery_id": shown["deliveries"][0]["id"],
            "job_id": job["id"],
        })  # fmt: skip
    key = (await make_key(api, TENANT_SCOPES, application=refs[0]["app"]))["key"]
    yield refs[0], refs[1], key


def _routes(app: web.Application) -> list[tuple[str, str]]:
    return sorted(
        {
            (r.method, r.resource.canonical)
            for r in app.router.routes()
            if r.resource is not None and r.method != "HEAD"
        }
    )


def _fill(path: str, refs: dict[str, str], app_ref: str) -> str:
    return re.sub(
        r"\{([^}]+)\}", lambda m: app_ref if m.group(1) == "app" else refs[m.group(1)], path
    )


def _aimed_at_one_record(path: str) -> bool:
    """A route that names an application or one record of one: the ones a bound key must
    find missing when they are another application's. Not the API keys (admin's alone),
    the event-type catalog (global: every application's producers share its types), nor
    the dashboard's and the portal's pages (each has its own sign-in, and its own test of
    one application's session against another's ids)."""
    return path.startswith(NESTED_PREFIX) or (
        "{" in path
        and not path.startswith(("/v1/api-keys", "/v1/event-types", "/dashboard", "/portal"))
    )


async def test_a_bound_key_finds_nothing_of_another_application(
    stack: Stack, two_tenants: tuple[dict[str, str], dict[str, str], str]
) -> None:
    mine, theirs, key = two_tenants
    async with serve_api(settings_for(stack)) as (app, api):
        checked, failures = 0, []
        for method, path in _routes(app):
            if not _aimed_at_one_record(path):
                continue
            for app_ref in (theirs["app"], theirs["uid"]):
                url = _fill(path, theirs, app_ref)
                body = {"type": "b.t", "data": {}} if path.endswith("/events") else None
                status, answer, _ = await api.call(method, url, json=body, key=key)
                checked += 1
                if status != 404:
                    failures.append(f"{method} {url}: {status} {answer}")
        for listing in ("/v1/events", "/v1/deliveries"):
            for ref in (theirs["app"], theirs["uid"]):
                status, _, _ = await api.call("GET", f"{listing}?application={ref}", key=key)
                checked += 1
                if status != 404:
                    failures.append(f"GET {listing}?application={ref}: {status}")
        assert checked >= 40
        assert not failures, "\n".join(failures)

        # The same reads of its own application succeed: the 404s above were not for nothing.
        for method, path in _routes(app):
            if method == "GET" and _aimed_at_one_record(path):
                status, answer, _ = await api.call(method, _fill(path, mine, mine["uid"]), key=key)
                assert status == 200, (path, answer)
        status, page, _ = await api.call("GET", "/v1/applications", key=key)
        assert [a["id"] for a in page["data"]] == [mine["app"]]


async def test_a_bound_key_manages_no_applications_and_is_never_an_admin(api: Api) -> None:
    app = await new_app(api, "Bound limits", uid="bound-limits")
    status, problem, _ = await api.call(
        "POST", "/v1/api-keys",
        json={"name": "x", "scopes": ["admin"], "application": "bound-limits"},
    )  # fmt: skip
    assert status == 422 and problem["errors"][0]["pointer"] == "/scopes", problem
    status, problem, _ = await api.call(
        "POST", "/v1/api-keys", json={"name": "x", "scopes": ["events:read"], "application": "nope"}
    )
    assert status == 422 and problem["errors"][0]["pointer"] == "/application", problem
    made = await make_key(api, TENANT_SCOPES, application=app["id"])
    assert made["application"] == app["id"]
    status, problem, _ = await api.call(
        "POST", "/v1/applications", json={"name": "Mine now"}, key=made["key"]
    )
    assert status == 403 and problem["type"].endswith("/bound-key"), problem
    # Its flat routes are its own application's, not the default one's.
    status, accepted, _ = await api.call(
        "POST", "/v1/events", json={"type": "a.b", "data": {}}, key=made["key"]
    )
    assert status == 202 and accepted["application"] == app["id"], accepted


@pytest.mark.parametrize("uid", [".", "..", "...", "app_x", "has space", "a/b", ""])
async def test_a_uid_that_cannot_name_one_path_segment_is_refused(api: Api, uid: str) -> None:
    status, problem, _ = await api.call(
        "POST", "/v1/applications", json={"name": "Bad uid", "uid": uid}
    )
    assert status == 422 and problem["errors"][0]["pointer"] == "/uid", problem


async def test_the_default_application_is_there_before_its_first_use(
    api: Api, stack: Stack
) -> None:
    client = Redis.from_url(stack.valkey.url, decode_responses=True)
    try:
        # As on a fresh store: nothing has used it yet.
        await client.delete(keys.app(DEFAULT_APP_ID))
        await client.hdel(keys.apps_uid(DEFAULT_APP_UID), DEFAULT_APP_UID)
        await client.zrem(keys.apps(0), DEFAULT_APP_ID)
        for ref in (DEFAULT_APP_UID, DEFAULT_APP_ID):
            status, body, _ = await api.call("GET", f"/v1/applications/{ref}")
            assert status == 200 and body["id"] == DEFAULT_APP_ID, body
        status, problem, _ = await api.call(
            "PATCH", "/v1/applications/default", json={"uid": "renamed"}
        )
        assert status == 422, problem
    finally:
        await client.aclose()


async def test_a_replay_answers_with_its_deliveries_application(
    api: Api, receiver: Receiver
) -> None:
    app = await new_app(api, "Replayed")
    await app_endpoint(api, receiver, app["id"], "replayed", ["r.t"], ["eu"])
    sent = await app_event(api, app["id"], "r.t", {}, channels=["eu"])
    assert sent["deliveries"] == 1
    status, replayed, _ = await api.call(
        "POST", f"/v1/applications/{app['id']}/events/{sent['id']}/replay"
    )
    assert status == 202, replayed
    assert [d["application"] for d in replayed["deliveries"]] == [app["id"]]


async def test_a_bound_key_renames_its_application_but_cannot_lift_its_rate_limit(
    api: Api,
) -> None:
    app = await new_app(api, "Quota", uid="quota-owner", rate_limit=5)
    key = (await make_key(api, TENANT_SCOPES, application=app["id"]))["key"]
    status, problem, _ = await api.call(
        "PATCH", "/v1/applications/quota-owner", json={"rate_limit": None}, key=key
    )
    assert status == 403 and problem["type"].endswith("/bound-key"), problem
    status, renamed, _ = await api.call(
        "PATCH", "/v1/applications/quota-owner", json={"name": "Quota Ltd"}, key=key
    )
    assert status == 200 and (renamed["name"], renamed["rate_limit"]) == ("Quota Ltd", 5)


async def test_nothing_of_a_deleted_application_is_sent_again(api: Api, receiver: Receiver) -> None:
    app = await new_app(api, "Gone soon")
    await app_endpoint(api, receiver, app["id"], "gone-soon", ["g.t"])
    sent = await app_event(api, app["id"], "g.t", {})

    async def delivered() -> bool:
        _, event, _ = await api.call("GET", f"/v1/events/{sent['id']}")
        return [d["status"] for d in event["deliveries"]] == ["succeeded"]

    await wait_for(delivered)
    _, event, _ = await api.call("GET", f"/v1/events/{sent['id']}")
    delivery_id = event["deliveries"][0]["id"]
    status, job, _ = await api.call("DELETE", f"/v1/applications/{app['id']}")
    assert status == 202, job
    # By the operator's flat routes too, before the deletion job has purged them.
    status, _, _ = await api.call("POST", f"/v1/deliveries/{delivery_id}/retry")
    assert status == 404
    status, _, _ = await api.call("POST", f"/v1/events/{sent['id']}/replay")
    assert status == 404
    assert len(receiver.for_endpoint("gone-soon")) == 1
