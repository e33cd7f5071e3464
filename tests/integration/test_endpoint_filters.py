"""Payload filters on endpoints against the real stack: the field and its refusals, the
test-filter route, and fan-out at ingest (real workers, a receiver verifying every
signature): two endpoints of one type, one filtered, get exactly the events they should,
and a filter changed in another API process takes effect from the next event."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.conftest import Api, create_endpoint, serve_api, settings_for, wait_for
from tests.support.apikeys import make_key
from tests.support.receiver import Receiver
from tests.support.stack import Stack

pytestmark = pytest.mark.integration

BIG = {"data.amount": {"$gte": 100}}


async def _filtered(api: Api, receiver: Receiver, name: str, event_type: str) -> dict[str, Any]:
    endpoint = await create_endpoint(api, receiver, name, [event_type])
    status, patched, _ = await api.call(
        "PATCH", f"/v1/endpoints/{endpoint['id']}", json={"filter": BIG}
    )
    assert status == 200, patched
    return endpoint


async def test_the_field_is_kept_refused_with_a_pointer_and_cleared(
    api: Api, receiver: Receiver
) -> None:
    wanted = {"$or": [{"data.amount": {"$gte": 100}}, {"channels": "vip"}]}
    status, created, _ = await api.call(
        "POST", "/v1/endpoints", json={"url": receiver.url("f1"), "filter": wanted}
    )
    assert status == 201, created
    api.created_endpoints.append(created["id"])
    assert created["filter"] == wanted
    path = f"/v1/endpoints/{created['id']}"
    bad = {"$or": [{"type": "a"}, {"data.amount": {"$gte": True}}]}
    status, problem, headers = await api.call("PATCH", path, json={"filter": bad})
    assert status == 422, problem
    assert headers["Content-Type"].startswith("application/problem+json")
    assert problem["type"].endswith("/invalid-filter")
    assert problem["errors"][0]["pointer"] == "/filter/$or/1/data.amount/$gte"
    status, kept, _ = await api.call("GET", path)
    assert kept["filter"] == wanted
    huge = {"data.x": {"$in": list(range(2000))}}
    status, problem, _ = await api.call(
        "POST", "/v1/endpoints", json={"url": receiver.url("f2"), "filter": huge}
    )
    assert status == 422 and problem["errors"][0]["pointer"] == "/filter", problem
    status, cleared, _ = await api.call("PATCH", path, json={"filter": None})
    assert status == 200 and cleared["filter"] is None, cleared


async def test_test_filter_says_which_clause_decided(api: Api, receiver: Receiver) -> None:
    endpoint = await _filtered(api, receiver, "tf", "order.placed")
    reader = (await make_key(api, ["endpoints:read"]))["key"]
    producer = (await make_key(api, ["events:write"]))["key"]
    for path in (
        f"/v1/endpoints/{endpoint['id']}/test-filter",
        f"/v1/applications/default/endpoints/{endpoint['id']}/test-filter",
    ):
        small = {"type": "order.placed", "data": {"amount": 5}}
        status, verdict, _ = await api.call("POST", path, json=small, key=reader)
        assert status == 200, verdict
        assert verdict == {
            "matches": False,
            "decided_by": "/filter/data.amount/$gte",
            "clause": "data.amount $gte 100",
        }
        large = {"type": "order.placed", "data": {"amount": 500}, "channels": ["eu"]}
        status, verdict, _ = await api.call("POST", path, json=large, key=reader)
        assert (status, verdict["matches"]) == (200, True), verdict
        status, problem, _ = await api.call("POST", path, json=small, key=producer)
        assert status == 403, problem
    status, problem, _ = await api.call(
        "POST", "/v1/endpoints/ep_nothing/test-filter", json={"type": "a", "data": {}}
    )
    assert status == 404, problem


async def _send(api: Api, event_type: str, amount: int) -> tuple[str, int]:
    status, body, _ = await api.call(
        "POST", "/v1/events", json={"type": event_type, "data": {"amount": amount}}
    )
    assert status == 202, body
    return body["id"], body["deliveries"]


async def _targets(api: Api, event_id: str) -> set[str]:
    status, body, _ = await api.call("GET", f"/v1/events/{event_id}")
    assert status == 200, body
    return {d["endpoint_id"] for d in body["deliveries"]}


async def _arrived(receiver: Receiver, name: str, event_ids: set[str]) -> None:
    async def all_in() -> bool:
        seen = {r.webhook_id for r in receiver.for_endpoint(name) if r.verified}
        return event_ids <= seen

    await wait_for(all_in)


async def test_only_passing_events_reach_a_filtered_endpoint(
    api: Api, receiver: Receiver, stack: Stack
) -> None:
    kind = "order.filtered"
    plain = await create_endpoint(api, receiver, "plain", [kind])
    picky = await _filtered(api, receiver, "picky", kind)
    small, fanout_small = await _send(api, kind, 50)
    large, fanout_large = await _send(api, kind, 150)
    assert (fanout_small, fanout_large) == (1, 2)
    assert await _targets(api, small) == {plain["id"]}
    assert await _targets(api, large) == {plain["id"], picky["id"]}
    await _arrived(receiver, "plain", {small, large})
    await _arrived(receiver, "picky", {large})

    # Another API process changes the filter; this one, which evaluated the old one, sees
    # the script's stale answer and the new filter from its very next event.
    async with serve_api(settings_for(stack)) as (_, other):
        status, patched, _ = await other.call(
            "PATCH", f"/v1/endpoints/{picky['id']}", json={"filter": {"data.amount": {"$lt": 100}}}
        )
        assert status == 200, patched
    now_small, _ = await _send(api, kind, 20)
    now_large, _ = await _send(api, kind, 500)
    assert await _targets(api, now_small) == {plain["id"], picky["id"]}
    assert await _targets(api, now_large) == {plain["id"]}
    await _arrived(receiver, "plain", {now_small, now_large})
    await _arrived(receiver, "picky", {now_small})
    got = {r.webhook_id for r in receiver.for_endpoint("picky")}
    assert got == {large, now_small}
    assert all(r.verified for r in receiver.for_endpoint("picky"))

    # A replay fans out by the filter as it is now: `large` passes it no longer.
    status, replayed, _ = await api.call("POST", f"/v1/events/{large}/replay")
    assert status == 202, replayed
    assert {d["endpoint_id"] for d in replayed["deliveries"]} == {plain["id"]}
    status, problem, _ = await api.call(
        "POST", f"/v1/events/{large}/replay", json={"endpoint_id": picky["id"]}
    )
    assert (status, problem["type"].rsplit("/", 1)[1]) == (422, "not-subscribed"), problem
    status, replayed, _ = await api.call("POST", f"/v1/events/{small}/replay")
    assert {d["endpoint_id"] for d in replayed["deliveries"]} == {plain["id"], picky["id"]}
