"""Who may act on a stored event: replay and expunge only by the key that sent it, or an
admin; a replay to one endpoint only for a type that endpoint subscribes to."""

from __future__ import annotations

from typing import Any

from tests.integration.conftest import Api, create_endpoint, wait_for
from tests.support.apikeys import make_key
from tests.support.receiver import Receiver
from tests.support.stack import ADMIN_KEY


async def _send(api: Api, key: str, event_type: str, data: dict[str, Any]) -> str:
    status, body, _ = await api.call(
        "POST", "/v1/events", json={"type": event_type, "data": data}, key=key
    )
    assert status == 202, body
    event_id: str = body["id"]
    return event_id


def _received(receiver: Receiver, name: str, count: int) -> Any:
    async def arrived() -> bool:
        return len(receiver.for_endpoint(name)) >= count

    return arrived


async def test_only_the_sending_key_or_an_admin_replays_or_expunges(
    api: Api, receiver: Receiver
) -> None:
    endpoint = await create_endpoint(api, receiver, "owned", ["owned.thing"])
    producer = (await make_key(api, ["events:write"], name="producer"))["key"]
    other = (await make_key(api, ["events:write"], name="other"))["key"]
    admin = (await make_key(api, ["admin"], name="an admin"))["key"]
    event_id = await _send(api, producer, "owned.thing", {"secret": "s3"})
    await wait_for(_received(receiver, "owned", 1))

    # To another producer the event does not exist: the very answer an unknown id gets.
    _, unknown, _ = await api.call("POST", "/v1/events/msg_nothing/replay", key=other)
    for path, body in [
        (f"/v1/events/{event_id}/replay", None),
        (f"/v1/events/{event_id}/replay", {"endpoint_id": endpoint["id"]}),
    ]:
        status, problem, _ = await api.call("POST", path, json=body, key=other)
        assert status == 404, problem
        assert {k: v for k, v in problem.items() if k != "instance"} == {
            k: v for k, v in unknown.items() if k != "instance"
        }
    status, problem, _ = await api.call("DELETE", f"/v1/events/{event_id}/payload", key=other)
    assert (status, problem["type"].rsplit("/", 1)[1]) == (404, "not-found")
    _, event, _ = await api.call("GET", f"/v1/events/{event_id}")
    assert event["data"] == {"secret": "s3"} and len(event["deliveries"]) == 1

    # The sender, the bootstrap admin key and an admin-scoped API key may.
    for key in (producer, ADMIN_KEY, admin):
        status, replayed, _ = await api.call("POST", f"/v1/events/{event_id}/replay", key=key)
        assert status == 202 and len(replayed["deliveries"]) == 1, replayed
    await wait_for(_received(receiver, "owned", 4))
    assert {r.webhook_id for r in receiver.for_endpoint("owned")} == {event_id}

    status, _, _ = await api.call("DELETE", f"/v1/events/{event_id}/payload", key=producer)
    assert status == 204
    second = await _send(api, producer, "owned.thing", {})
    status, _, _ = await api.call("DELETE", f"/v1/events/{second}/payload", key=admin)
    assert status == 204
    for gone in (event_id, second):
        _, event, _ = await api.call("GET", f"/v1/events/{gone}")
        assert event["data"] is None


async def test_a_replay_to_one_endpoint_needs_its_subscription(
    api: Api, receiver: Receiver
) -> None:
    subscribed = await create_endpoint(api, receiver, "sub-yes", ["sub.this"])
    elsewhere = await create_endpoint(api, receiver, "sub-no", ["sub.that"])
    event_id = await _send(api, ADMIN_KEY, "sub.this", {"n": 1})
    await wait_for(_received(receiver, "sub-yes", 1))
    path = f"/v1/events/{event_id}/replay"

    status, problem, _ = await api.call("POST", path, json={"endpoint_id": elsewhere["id"]})
    assert status == 422, problem
    assert problem["type"].rsplit("/", 1)[1] == "not-subscribed"
    assert problem["errors"][0]["pointer"] == "/endpoint_id"
    _, event, _ = await api.call("GET", f"/v1/events/{event_id}")
    assert [d["endpoint_id"] for d in event["deliveries"]] == [subscribed["id"]]

    # An endpoint without an event_types filter takes every type, a replay too.
    catch_all = await create_endpoint(api, receiver, "sub-all")
    for target in (subscribed, catch_all):
        status, replayed, _ = await api.call("POST", path, json={"endpoint_id": target["id"]})
        assert status == 202, replayed
    await wait_for(_received(receiver, "sub-yes", 2))
    await wait_for(_received(receiver, "sub-all", 1))
    assert receiver.for_endpoint("sub-no") == []
