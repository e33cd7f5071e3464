"""GET /v1/events with its filters, and POST /v1/events/{id}/replay."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

from pydantic import SecretStr

from tests.integration.conftest import (
    Api,
    create_endpoint,
    delivery_statuses,
    send_event,
    serve_api,
    settings_for,
    wait_for,
)
from tests.support.apikeys import make_key
from tests.support.logged import wait_logged
from tests.support.receiver import Receiver
from tests.support.stack import ADMIN_KEY, Stack
from webhook_service.api.auth import ADMIN_KEY_ID


async def _page(api: Api, query: str, key: str = ADMIN_KEY) -> dict[str, Any]:
    status, body, _ = await api.call("GET", f"/v1/events?{query}", key=key)
    assert status == 200, body
    page: dict[str, Any] = body
    return page


async def test_events_list_filters_and_pages(api: Api, receiver: Receiver, stack: Stack) -> None:
    await create_endpoint(api, receiver, "evlist", ["evlist.a"])
    status, producer, _ = await api.call(
        "POST", "/v1/api-keys", json={"name": "billing", "scopes": ["events:write"]}
    )
    assert status == 201, producer
    sent_a = []
    for n in range(3):
        sent_a.append(await send_event(api, "evlist.a", {"n": n}))
        await asyncio.sleep(0.002)  # each its own millisecond, for the time range below
    status, accepted, _ = await api.call(
        "POST", "/v1/events", json={"type": "evlist.b", "data": {}}, key=producer["key"]
    )
    assert status == 202
    sent_b = accepted["id"]
    await wait_logged(stack.valkey.url)  # lists are read from the SQL log

    page = await _page(api, "type=evlist.a")
    assert [e["id"] for e in page["data"]] == sent_a[::-1]
    newest = page["data"][0]
    assert newest["type"] == "evlist.a" and newest["deliveries"] == 1
    assert newest["key_id"] == ADMIN_KEY_ID and newest["payload_deleted"] is False
    assert "data" not in newest  # a list never carries payloads
    assert [e["id"] for e in (await _page(api, f"key_id={producer['id']}"))["data"]] == [sent_b]
    both = await _page(api, f"type=evlist.b&key_id={producer['id']}")
    assert [e["id"] for e in both["data"]] == [sent_b]
    assert (await _page(api, f"type=evlist.a&key_id={producer['id']}"))["data"] == []

    # Paging: one at a time, newest first, the same events as one big page.
    seen, cursor = [], ""
    while True:
        page = await _page(api, f"type=evlist.a&limit=1&cursor={cursor}")
        seen += [e["id"] for e in page["data"]]
        if page["next_cursor"] is None:
            break
        cursor = page["next_cursor"]
    assert seen == sent_a[::-1]

    # A time range: since the second event, until before the last one.
    status, second, _ = await api.call("GET", f"/v1/events/{sent_a[1]}")
    ranged = await _page(api, f"type=evlist.a&since={second['timestamp']}")
    assert [e["id"] for e in ranged["data"]] == sent_a[:0:-1]
    ranged = await _page(api, f"type=evlist.a&until={second['timestamp']}")
    assert [e["id"] for e in ranged["data"]] == sent_a[1::-1]

    status, problem, _ = await api.call("GET", "/v1/events?since=soon")
    assert (status, problem["errors"][0]["pointer"]) == (422, "#/query/since")


async def test_replay_to_all_or_one_endpoint(api: Api, receiver: Receiver, stack: Stack) -> None:
    first = await create_endpoint(api, receiver, "rp1", ["replay.me"])
    second = await create_endpoint(api, receiver, "rp2", ["replay.me"])
    event_id = await send_event(api, "replay.me", {"order": 5})
    await wait_for(lambda: _all_succeeded(api, event_id, 2))
    originals = set((await delivery_statuses(api, event_id)).keys())
    assert originals == {first["id"], second["id"]}

    status, replayed, _ = await api.call("POST", f"/v1/events/{event_id}/replay")
    assert status == 202, replayed
    assert replayed["event_id"] == event_id
    assert {d["endpoint_id"] for d in replayed["deliveries"]} == originals
    assert all(d["status"] == "pending" and d["attempts"] == 0 for d in replayed["deliveries"])
    await wait_for(lambda: _all_succeeded(api, event_id, 4))

    status, one, _ = await api.call(
        "POST", f"/v1/events/{event_id}/replay", json={"endpoint_id": second["id"]}
    )
    assert status == 202 and [d["endpoint_id"] for d in one["deliveries"]] == [second["id"]]
    await wait_for(lambda: _all_succeeded(api, event_id, 5))

    _, event, _ = await api.call("GET", f"/v1/events/{event_id}")
    ids = [d["id"] for d in event["deliveries"]]
    assert len(set(ids)) == 5  # never the original's id again
    # Every send is the same event to the subscriber: one webhook-id to de-duplicate on.
    got = receiver.for_endpoint("rp1") + receiver.for_endpoint("rp2")
    assert len(got) == 5 and {r.webhook_id for r in got} == {event_id}
    assert all(r.verified for r in got)
    # The replay lists first: its ids carry the replay's time.
    await wait_logged(stack.valkey.url)
    status, page, _ = await api.call("GET", f"/v1/deliveries?endpoint_id={second['id']}")
    assert page["data"][0]["id"] == one["deliveries"][0]["id"]


async def test_replay_refusals(api: Api, receiver: Receiver) -> None:
    endpoint = await create_endpoint(api, receiver, "rpx", ["replay.no"])
    event_id = await send_event(api, "replay.no", {})
    path = f"/v1/events/{event_id}/replay"
    status, problem, _ = await api.call("POST", path, json={"endpoint_id": "ep_nothing"})
    assert (status, problem["errors"][0]["pointer"]) == (422, "/endpoint_id")
    status, _, _ = await api.call("POST", path, json={"endpoint": endpoint["id"]})
    assert status == 422
    assert (await api.call("POST", "/v1/events/msg_nothing/replay"))[0] == 404
    status, _, _ = await api.call(
        "PATCH", f"/v1/endpoints/{endpoint['id']}", json={"disabled": True}
    )
    assert status == 200
    status, problem, _ = await api.call("POST", path, json={"endpoint_id": endpoint["id"]})
    assert (status, problem["type"].rsplit("/", 1)[1]) == (409, "conflict")


async def _all_succeeded(api: Api, event_id: str, count: int) -> bool:
    _, event, _ = await api.call("GET", f"/v1/events/{event_id}")
    statuses = [d["status"] for d in event["deliveries"]]
    return len(statuses) == count and set(statuses) == {"succeeded"}


async def test_the_admin_keys_id_tells_nothing_of_the_key(api: Api, stack: Stack) -> None:
    """Any events:read key sees the id of the key that sent an event. The bootstrap key's
    used to be a SHA-256 prefix of it, a way to test guesses offline; two API processes
    with different admin keys now show one id, so it carries nothing of either."""
    other_key = "another-admin-key-" + "7" * 24
    settings = settings_for(stack).model_copy(update={"admin_key": SecretStr(other_key)})
    reader = await make_key(api, ["events:read"])
    async with serve_api(settings) as (_, other):
        for sender, key in ((api, ADMIN_KEY), (other, other_key)):
            body = {"type": "keyid.shown", "data": {}}
            status, _, _ = await sender.call("POST", "/v1/events", json=body, key=key)
            assert status == 202
    await wait_logged(stack.valkey.url)
    shown = [e["key_id"] for e in (await _page(api, "type=keyid.shown", reader["key"]))["data"]]
    assert len(shown) == 2 and shown[0] == shown[1] == ADMIN_KEY_ID
    for key in (ADMIN_KEY, other_key):
        digest = hashlib.sha256(key.encode()).hexdigest()
        assert shown[0].lstrip("k") not in digest and key not in shown[0]
