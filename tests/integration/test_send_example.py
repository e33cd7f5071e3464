"""Sending an example event to one endpoint (issue 17: the portal's "send an example"),
through the real API, Valkey, Celery workers and receivers that verify every request with
the endpoint's own secret (standardwebhooks)."""

from __future__ import annotations

import json
from typing import Any

from tests.integration.conftest import Api, wait_for
from tests.integration.test_applications import app_endpoint, new_app
from tests.integration.test_event_types import create, fresh
from tests.integration.test_portal_auth import box, enter, portal_link
from tests.support.receiver import Receiver
from tests.support.stack import ADMIN_KEY
from webhook_service.crypto import SecretBox

__all__ = ["box"]  # the fixture: the API's keyring, to read a portal session's form token

INVOICE = {"invoice_id": "in_42", "amount": 1999}


async def send_example(
    api: Api, app: str, endpoint_id: str, key: str = ADMIN_KEY, **body: Any
) -> tuple[int, Any]:
    status, answer, _ = await api.call(
        "POST", f"/v1/applications/{app}/endpoints/{endpoint_id}/send-example", json=body, key=key
    )
    return status, answer


async def test_an_example_reaches_its_one_endpoint_signed_and_no_other(
    api: Api, receiver: Receiver, box: SecretBox
) -> None:
    name = fresh("invoice.paid")
    await create(api, name=name, description="An invoice was paid.", examples=[INVOICE])
    mine = await new_app(api, "Example sender")
    theirs = await new_app(api, "Example bystander")
    # The target takes another type and a channel: an example reaches it all the same.
    target = await app_endpoint(api, receiver, mine["id"], "ex-target", ["other.type"], ["eu"])
    for label, app in (("ex-same", mine), ("ex-other-app", theirs)):
        await app_endpoint(api, receiver, app["id"], label, [name])
    await app_endpoint(api, receiver, mine["id"], "ex-every-type", None)

    # As the portal sends it: with a session's credential, the catalog's example as data.
    entered = await enter(api, box, await portal_link(api, mine["id"]))
    status, sent = await send_example(
        api, mine["id"], target["id"], key=entered.credential, event_type=name
    )
    assert status == 202, sent
    assert set(sent) == {"event_id", "delivery_id"} and sent["delivery_id"].startswith("dlv_")

    async def arrived() -> bool:
        return bool(receiver.for_endpoint("ex-target"))

    await wait_for(arrived)
    (got,) = receiver.for_endpoint("ex-target")
    assert got.verified and got.webhook_id == sent["event_id"]
    payload = json.loads(got.body)
    assert payload["type"] == name and payload["data"] == INVOICE
    # One delivery, to it: no other endpoint of its application or another's was given one.
    status, event, _ = await api.call(
        "GET", f"/v1/applications/{mine['id']}/events/{sent['event_id']}"
    )
    assert status == 200, event
    assert [d["endpoint_id"] for d in event["deliveries"]] == [target["id"]]
    assert [d["id"] for d in event["deliveries"]] == [sent["delivery_id"]]
    assert event["example"] is True
    for label in ("ex-same", "ex-other-app", "ex-every-type"):
        assert not receiver.for_endpoint(label), label

    # The log keeps it marked: the list is read from SQL, once the event is shipped there.
    async def listed() -> list[dict[str, Any]]:
        status, page, _ = await api.call("GET", f"/v1/applications/{mine['id']}/events")
        assert status == 200, page
        return [e for e in page["data"] if e["id"] == sent["event_id"]]

    async def shipped() -> bool:
        return bool(await listed())

    await wait_for(shipped)
    assert [e["example"] for e in await listed()] == [True]

    # An ordinary event of the type reaches the subscribers, and is no example.
    status, accepted, _ = await api.call(
        "POST", f"/v1/applications/{mine['id']}/events", json={"type": name, "data": {}}
    )
    assert status == 202 and accepted["deliveries"] == 2, accepted
    status, event, _ = await api.call("GET", f"/v1/events/{accepted['id']}")
    assert event["example"] is False


async def test_data_given_is_sent_as_given(api: Api, receiver: Receiver) -> None:
    app = await new_app(api, "Example data")
    target = await app_endpoint(api, receiver, app["id"], "ex-data", None)
    # A type the catalog does not have: with data, nothing is needed of it.
    status, sent = await send_example(
        api, app["id"], target["id"], event_type="custom.thing", data={"n": 1}
    )
    assert status == 202, sent

    async def arrived() -> bool:
        return bool(receiver.for_endpoint("ex-data"))

    await wait_for(arrived)
    (got,) = receiver.for_endpoint("ex-data")
    assert got.verified and json.loads(got.body)["data"] == {"n": 1}


async def test_what_cannot_be_sent_is_refused_and_nothing_stored(
    api: Api, receiver: Receiver
) -> None:
    app = await new_app(api, "Example refusals")
    other = await new_app(api, "Example elsewhere")
    target = await app_endpoint(api, receiver, app["id"], "ex-refused", None)
    elsewhere = await app_endpoint(api, receiver, other["id"], "ex-elsewhere", None)
    bare = fresh("bare.type")
    await create(api, name=bare, description="No example.")
    cases: list[tuple[dict[str, Any], int, str]] = [
        ({"event_type": fresh("missing.type")}, 422, "/event_type"),
        ({"event_type": bare}, 422, "/data"),
        ({"event_type": "endpoint.disabled", "data": {}}, 422, "/type"),
        ({"event_type": "a.b", "data": "text"}, 422, "/data"),
        ({"data": {}}, 422, "/event_type"),
    ]
    for body, wanted, pointer in cases:
        status, problem = await send_example(api, app["id"], target["id"], **body)
        assert status == wanted and problem["errors"][0]["pointer"] == pointer, (body, problem)
    # Another application's endpoint is not there.
    status, _ = await send_example(api, app["id"], elsewhere["id"], event_type="a.b", data={})
    assert status == 404
    status, _ = await send_example(api, app["id"], "ep_nothing", event_type="a.b", data={})
    assert status == 404
    # A disabled endpoint gets none.
    status, _, _ = await api.call(
        "POST", f"/v1/applications/{app['id']}/endpoints/{target['id']}/disable"
    )
    assert status == 200
    status, problem = await send_example(api, app["id"], target["id"], event_type="a.b", data={})
    assert status == 409, problem
    status, page, _ = await api.call("GET", f"/v1/applications/{app['id']}/events")
    assert status == 200 and page["data"] == [], page
    assert not receiver.for_endpoint("ex-refused") and not receiver.for_endpoint("ex-elsewhere")
