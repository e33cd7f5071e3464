"""Idempotency, bad input and the history API against a real Valkey."""

from __future__ import annotations

from typing import Any, TypedDict

import redis

from tests.integration.conftest import Api, create_endpoint, send_event, wait_for
from tests.support.receiver import Receiver
from tests.support.stack import Stack
from webhook_service.api.auth import ADMIN_KEY_ID
from webhook_service.api.idempotency import fingerprint
from webhook_service.store import keys
from webhook_service.store.applications import DEFAULT_APP_ID


async def test_idempotent_replay_conflict_and_mismatch(
    api: Api, receiver: Receiver, stack: Stack
) -> None:
    await create_endpoint(api, receiver, "idem", ["order.placed"])
    body = {"type": "order.placed", "data": {"order": 7}}
    headers = {"Idempotency-Key": "order-7"}
    status, first, first_headers = await api.call("POST", "/v1/events", json=body, headers=headers)
    assert status == 202
    assert "Idempotent-Replayed" not in first_headers
    # Same body, keys in another order: the same request.
    status, again, again_headers = await api.call(
        "POST", "/v1/events", data=b'{"data": {"order": 7}, "type": "order.placed"}',
        headers={**headers, "Content-Type": "application/json"},
    )  # fmt: skip
    assert status == 202
    assert again == first
    assert again_headers["Idempotent-Replayed"] == "true"

    status, problem, _ = await api.call(
        "POST", "/v1/events", json={**body, "data": {"order": 8}}, headers=headers
    )
    assert status == 422
    assert problem["type"].endswith("idempotency-key-reused")

    # A first request still in flight (strict mode holds it while the AOF syncs).
    client = redis.Redis.from_url(stack.valkey.url)
    client.hset(
        keys.idempotency(DEFAULT_APP_ID, ADMIN_KEY_ID, "in-flight-key"),
        mapping={"hash": "x", "state": "in_flight", "event": "msg_x", "until": 2**50},
    )
    status, problem, headers_409 = await api.call(
        "POST", "/v1/events", json=body, headers={"Idempotency-Key": "in-flight-key"}
    )
    assert status == 422  # another body than the one in flight
    client.hset(
        keys.idempotency(DEFAULT_APP_ID, ADMIN_KEY_ID, "in-flight-key"),
        "hash",
        fingerprint(body),
    )
    status, problem, headers_409 = await api.call(
        "POST", "/v1/events", json=body, headers={"Idempotency-Key": "in-flight-key"}
    )
    assert status == 409
    assert headers_409["Retry-After"] == "1"

    # Exactly one event went out for the replayed key.
    await wait_for(lambda: _arrived(receiver, "idem", 1))
    assert {r.webhook_id for r in receiver.for_endpoint("idem")} == {first["id"]}


async def _arrived(receiver: Receiver, name: str, count: int) -> bool:
    return len(receiver.for_endpoint(name)) >= count


class _Call(TypedDict, total=False):
    """The keyword arguments of one Api.call."""

    json: Any
    headers: dict[str, str]
    key: str | None
    data: bytes


async def test_bad_input_is_a_problem_and_stores_nothing(api: Api, stack: Stack) -> None:
    client = redis.Redis.from_url(stack.valkey.url)
    before = client.hget(keys.metrics(0), "events_accepted")
    cases: list[tuple[_Call, int]] = [
        ({"data": b"{not json", "headers": {"Content-Type": "application/json"}}, 400),
        ({"data": b"type=x", "headers": {"Content-Type": "text/plain"}}, 415),
        ({"json": {"type": "bad type!", "data": {}}}, 422),
        ({"json": {"type": "ok.type", "data": []}}, 422),
        ({"json": {"type": "ok.type"}}, 422),
        ({"json": {"type": "ok.type", "data": {"x": "y" * 300_000}}}, 413),
        ({"json": {"type": "ok.type", "data": {}}, "key": None}, 401),
        ({"json": {"type": "ok.type", "data": {}}, "key": "wrong"}, 401),
    ]
    for kwargs, expected in cases:
        status, problem, headers = await api.call("POST", "/v1/events", **kwargs)
        assert status == expected, (kwargs.get("json"), problem)
        assert headers["Content-Type"].startswith("application/problem+json")
        assert problem["status"] == expected
        assert problem["title"] and problem["detail"] and problem["type"]
    status, problem, _ = await api.call(
        "POST", "/v1/events", json={"type": "bad type!", "data": {}}
    )
    assert problem["errors"][0]["pointer"] == "/type"
    assert client.hget(keys.metrics(0), "events_accepted") == before
    for path in ("/v1/events/msg_nope", "/v1/deliveries/dlv_nope", "/v1/endpoints/ep_nope"):
        status, problem, _ = await api.call("GET", path)
        assert status == 404 and problem["status"] == 404
    status, _, _ = await api.call("GET", "/healthz", key=None)
    assert status == 200


async def test_history_filters_and_paging(api: Api, receiver: Receiver) -> None:
    receiver.behaviours["bad"] = lambda _n, _i: 500
    good = await create_endpoint(api, receiver, "good", ["page.test"])
    bad = await create_endpoint(api, receiver, "bad", ["page.test", "other.test"])
    page_ids = [await send_event(api, "page.test", {"n": n}) for n in range(7)]
    other_ids = [await send_event(api, "other.test", {"n": n}) for n in range(3)]

    async def settled() -> bool:
        _, body, _ = await api.call("GET", f"/v1/deliveries?endpoint_id={bad['id']}&status=failed")
        return len(body["data"]) == 10

    await wait_for(settled, timeout=60)

    # Newest first, paged with a stable cursor, no repeats, nothing missing.
    seen: list[str] = []
    cursor = None
    while True:
        query = f"/v1/deliveries?endpoint_id={good['id']}&limit=3"
        status, body, _ = await api.call("GET", query + (f"&cursor={cursor}" if cursor else ""))
        assert status == 200
        seen += [d["event_id"] for d in body["data"]]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert seen == list(reversed(page_ids))

    _, body, _ = await api.call("GET", "/v1/deliveries?event_type=other.test&limit=50")
    assert {d["event_id"] for d in body["data"]} == set(other_ids)
    _, body, _ = await api.call("GET", f"/v1/deliveries?status=succeeded&endpoint_id={good['id']}")
    assert len(body["data"]) == 7
    _, body, _ = await api.call("GET", f"/v1/deliveries?status=failed&endpoint_id={good['id']}")
    assert body["data"] == []
    _, body, _ = await api.call("GET", f"/v1/deliveries?event_id={page_ids[0]}")
    assert {d["endpoint_id"] for d in body["data"]} == {good["id"], bad["id"]}

    stamps = {i: (await api.call("GET", f"/v1/events/{i}"))[1]["timestamp"] for i in page_ids}
    since = stamps[page_ids[3]]
    _, body, _ = await api.call("GET", f"/v1/deliveries?endpoint_id={good['id']}&since={since}")
    # page_ids[3:], and an earlier event sent in the same millisecond (since is inclusive).
    assert {d["event_id"] for d in body["data"]} == {i for i, t in stamps.items() if t >= since}
    assert set(page_ids[3:]) <= {d["event_id"] for d in body["data"]}
    _, body, _ = await api.call("GET", f"/v1/deliveries?endpoint_id={good['id']}&until={since}")
    assert {d["event_id"] for d in body["data"]} == {i for i, t in stamps.items() if t <= since}
    assert set(page_ids[:4]) <= {d["event_id"] for d in body["data"]}
    status, _, _ = await api.call("GET", "/v1/deliveries?status=lost")
    assert status == 422
    status, _, _ = await api.call("GET", "/v1/deliveries?limit=0")
    assert status == 422
