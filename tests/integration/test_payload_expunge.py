"""DELETE /v1/events/{id}/payload: the body goes, the records stay, and deliveries not yet
sent fail with payload_deleted. Workers are stopped while deliveries wait, so they really
are pending (this module has its own stack)."""

from __future__ import annotations

import redis

from tests.integration.conftest import Api, create_endpoint, send_event, wait_for
from tests.support.logged import wait_logged
from tests.support.receiver import Receiver
from tests.support.stack import Stack
from webhook_service.store import keys


async def test_expunged_payload_keeps_records_and_fails_what_is_unsent(
    api: Api, receiver: Receiver, stack: Stack
) -> None:
    endpoint = await create_endpoint(api, receiver, "ex", ["expunge.me"])
    sent = await send_event(api, "expunge.me", {"card": "4111"})

    async def sent_ok() -> bool:
        _, event, _ = await api.call("GET", f"/v1/events/{sent}")
        first: str = event["deliveries"][0]["status"]
        return first == "succeeded"

    await wait_for(sent_ok)
    stack.kill("worker0")
    waiting = await send_event(api, "expunge.me", {"card": "5500"})
    status, stats, _ = await api.call("GET", f"/v1/endpoints/{endpoint['id']}/stats")
    assert stats["backlog"] == 1

    for event_id in (sent, waiting):
        status, body, _ = await api.call("DELETE", f"/v1/events/{event_id}/payload")
        assert (status, body) == (204, None)
    # Again: still gone, still 204.
    assert (await api.call("DELETE", f"/v1/events/{sent}/payload"))[0] == 204
    assert (await api.call("DELETE", "/v1/events/msg_nothing/payload"))[0] == 404

    client = redis.Redis.from_url(stack.valkey.url, decode_responses=True)
    for event_id in (sent, waiting):
        assert client.hget(keys.event(event_id), "body") is None
        _, event, _ = await api.call("GET", f"/v1/events/{event_id}")
        assert event["data"] is None and len(event["deliveries"]) == 1
    await wait_logged(stack.valkey.url)  # the list is the SQL log's
    _, page, _ = await api.call("GET", "/v1/events?type=expunge.me")
    assert [e["payload_deleted"] for e in page["data"]] == [True, True]
    status, _, _ = await api.call("POST", f"/v1/events/{sent}/replay")
    assert status == 409

    stack.start("worker", "worker0")

    async def failed_unsent() -> bool:
        _, event, _ = await api.call("GET", f"/v1/events/{waiting}")
        first: str = event["deliveries"][0]["status"]
        return first == "failed"

    await wait_for(failed_unsent)
    _, event, _ = await api.call("GET", f"/v1/events/{waiting}")
    (delivery,) = event["deliveries"]
    assert (delivery["last_error"], delivery["attempts"]) == ("payload_deleted", 0)
    _, event, _ = await api.call("GET", f"/v1/events/{sent}")
    assert event["deliveries"][0]["status"] == "succeeded"
    # The subscriber only ever got the first event.
    assert [r.webhook_id for r in receiver.for_endpoint("ex")] == [sent]
    _, stats, _ = await api.call("GET", f"/v1/endpoints/{endpoint['id']}/stats")
    assert stats["backlog"] == 0
