"""Delivery history filters on the last attempt's status class and the attempt count, read
from the SQL log."""

from __future__ import annotations

import pytest

from tests.integration.conftest import Api, create_endpoint, send_event, wait_for
from tests.support.logged import wait_logged
from tests.support.receiver import Receiver
from tests.support.stack import Stack

TYPE = "filters.made"


async def _ids(api: Api, query: str) -> list[str]:
    status, page, _ = await api.call("GET", f"/v1/deliveries?{query}")
    assert status == 200, page
    return [d["id"] for d in page["data"]]


async def _settled(api: Api, stack: Stack, endpoint_ids: list[str], count: int) -> None:
    """Until no delivery of these endpoints is pending and the log has their last state (a
    list shows a pending one as Redis has it, before the log does)."""

    async def done() -> bool:
        for endpoint_id in endpoint_ids:
            pending = await _ids(api, f"endpoint_id={endpoint_id}&status=pending")
            total = await _ids(api, f"endpoint_id={endpoint_id}")
            if pending or len(total) < count:
                return False
        return True

    await wait_for(done, timeout=30)
    await wait_logged(stack.valkey.url)


async def test_filters_by_status_class_and_attempts(
    api: Api, receiver: Receiver, stack: Stack
) -> None:
    receiver.behaviours["f400"] = lambda _n, _i: 400
    receiver.behaviours["f500"] = lambda _n, _i: 503
    ok = await create_endpoint(api, receiver, "fok", [TYPE])
    client_error = await create_endpoint(api, receiver, "f400", [TYPE])
    server_error = await create_endpoint(api, receiver, "f500", [TYPE])
    # Nothing listens on port 9 of loopback: the connection is refused.
    status, refused, _ = await api.call(
        "POST", "/v1/endpoints", json={"url": "http://127.0.0.1:9/x", "event_types": [TYPE]}
    )
    assert status == 201
    api.created_endpoints.append(refused["id"])
    endpoints = {"2xx": ok, "4xx": client_error, "5xx": server_error, "network": refused}
    for n in range(2):
        await send_event(api, TYPE, {"n": n})
    await _settled(api, stack, [e["id"] for e in endpoints.values()], 2)

    for status_class, endpoint in endpoints.items():
        mine = await _ids(api, f"endpoint_id={endpoint['id']}")
        assert await _ids(api, f"endpoint_id={endpoint['id']}&status_class={status_class}") == mine
        everywhere = await _ids(api, f"status_class={status_class}&limit=250")
        assert set(mine) <= set(everywhere)
        others = {c for c in endpoints if c != status_class}
        for other in others:
            assert not await _ids(api, f"endpoint_id={endpoint['id']}&status_class={other}")

    # The schedule has 4 attempts: a success takes 1, a failure spends all 4.
    budget = len(stack.env["WEBHOOK_RETRY_SCHEDULE"].split(","))
    assert len(await _ids(api, f"endpoint_id={ok['id']}&attempts_max=1")) == 2
    assert not await _ids(api, f"endpoint_id={ok['id']}&attempts_min=2")
    failing = server_error["id"]
    assert len(await _ids(api, f"endpoint_id={failing}&attempts_min={budget}")) == 2
    assert not await _ids(api, f"endpoint_id={failing}&attempts_min=2&attempts_max={budget - 1}")
    exhausted = await _ids(api, f"attempts_min={budget}&attempts_max={budget}&limit=250")
    assert set(await _ids(api, f"endpoint_id={failing}")) <= set(exhausted)
    assert not set(await _ids(api, f"endpoint_id={ok['id']}")) & set(exhausted)

    # A cursor pages through one endpoint's failed 5xx deliveries, newest first.
    query = f"endpoint_id={failing}&status=failed&status_class=5xx&limit=1"
    status, first, _ = await api.call("GET", f"/v1/deliveries?{query}")
    assert status == 200 and len(first["data"]) == 1 and first["next_cursor"]
    status, second, _ = await api.call(
        "GET", f"/v1/deliveries?{query}&cursor={first['next_cursor']}"
    )
    assert [first["data"][0]["id"], second["data"][0]["id"]] == await _ids(
        api, f"endpoint_id={failing}"
    )
    # Each attempt moved the delivery on: only its last count finds it.
    for delivery_id in await _ids(api, f"endpoint_id={failing}"):
        assert delivery_id in await _ids(
            api, f"attempts_min={budget}&attempts_max={budget}&limit=250"
        )
        assert delivery_id not in await _ids(api, "attempts_min=1&attempts_max=1&limit=250")


async def test_the_values_most_deliveries_end_with_are_found_by_every_filter(
    api: Api, receiver: Receiver, stack: Stack
) -> None:
    """A delivery that succeeds at its first try (succeeded, 2xx, one attempt, the values
    nearly every delivery ends with) is found by each of those filters, alone or with
    others, and not by the values it does not have."""
    dense_type, other_type = "filters.dense", "filters.other"
    receiver.behaviours["dfail"] = lambda _n, _i: 503
    first = await create_endpoint(api, receiver, "dense1", [dense_type, other_type])
    second = await create_endpoint(api, receiver, "dense2", [dense_type])
    failing = await create_endpoint(api, receiver, "dfail", [dense_type])
    event_id = await send_event(api, dense_type, {"n": 1})
    other_id = await send_event(api, other_type, {"n": 2})
    await _settled(api, stack, [first["id"], second["id"], failing["id"]], 1)
    await _settled(api, stack, [first["id"]], 2)

    _, event, _ = await api.call("GET", f"/v1/events/{event_id}")
    by_endpoint = {d["endpoint_id"]: d["id"] for d in event["deliveries"]}
    ours, theirs = by_endpoint[first["id"]], by_endpoint[second["id"]]
    bad = by_endpoint[failing["id"]]
    _, other, _ = await api.call("GET", f"/v1/events/{other_id}")
    (mine_other,) = [d["id"] for d in other["deliveries"]]
    succeeded = {ours, theirs, mine_other}

    everywhere = "limit=250"
    dense = ["status=succeeded", "status_class=2xx", "attempts_min=1&attempts_max=1"]
    for query in [*dense, "status=succeeded&status_class=2xx&attempts_max=1"]:
        found = await _ids(api, f"{query}&{everywhere}")
        assert succeeded <= set(found), query
        assert bad not in found, query
        assert await _ids(api, f"endpoint_id={first['id']}&{query}") == [mine_other, ours]
        assert await _ids(api, f"endpoint_id={second['id']}&{query}") == [theirs]
        assert not await _ids(api, f"endpoint_id={failing['id']}&{query}")
        assert await _ids(api, f"event_type={other_type}&{query}") == [mine_other]
        typed = await _ids(api, f"event_type={dense_type}&{query}&{everywhere}")
        assert {ours, theirs} <= set(typed) and bad not in typed
        assert await _ids(api, f"endpoint_id={first['id']}&event_type={dense_type}&{query}") == [
            ours
        ]
        assert await _ids(api, f"event_id={event_id}&{query}") == sorted(
            [ours, theirs], reverse=True
        )
    # The failing one, by the indexed values it has, and not by the dense ones.
    assert await _ids(api, f"endpoint_id={failing['id']}&status=failed&status_class=5xx") == [bad]
    assert not await _ids(api, f"endpoint_id={failing['id']}&attempts_max=1")
    # A cursor pages through the unindexed value as through an indexed one.
    query = f"endpoint_id={first['id']}&status=succeeded&limit=1"
    status, page, _ = await api.call("GET", f"/v1/deliveries?{query}")
    assert status == 200 and [d["id"] for d in page["data"]] == [mine_other]
    status, page, _ = await api.call("GET", f"/v1/deliveries?{query}&cursor={page['next_cursor']}")
    assert [d["id"] for d in page["data"]] == [ours]

    # Retried and succeeded again: found by its new count, and no longer as pending.
    status, _, _ = await api.call("POST", f"/v1/deliveries/{ours}/retry")
    assert status == 202

    async def attempted_twice() -> bool:
        found = await _ids(api, f"endpoint_id={first['id']}&attempts_min=2&status=succeeded")
        return found == [ours]

    await wait_for(attempted_twice, timeout=30)
    assert ours not in await _ids(api, f"endpoint_id={first['id']}&attempts_max=1")
    assert ours not in await _ids(api, f"endpoint_id={first['id']}&status=pending")


@pytest.mark.parametrize(
    "query",
    ["status_class=1xx", "status_class=", "attempts_min=-1", "attempts_max=x", "attempts_min=²"],
)
async def test_bad_filters_are_422(api: Api, query: str) -> None:
    status, problem, _ = await api.call("GET", f"/v1/deliveries?{query}")
    assert status == 422
    assert problem["errors"][0]["pointer"] == "#/query/" + query.partition("=")[0]
