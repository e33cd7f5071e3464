"""An endpoint's own headers carry the receiver's credentials: sealed at rest (Redis and its
AOF), values shown only to keys that may change them, opened by the worker for the
receiver alone. And what an endpoint may not set or say."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from tests.integration.conftest import Api, send_event, wait_for
from tests.support.apikeys import make_key, redis_contents
from tests.support.receiver import Receiver
from tests.support.stack import ADMIN_KEY, Stack

pytestmark = pytest.mark.integration


def _aof(stack: Stack) -> bytes:
    return b"".join(
        p.read_bytes() for p in Path(stack.valkey.directory).rglob("*aof*") if p.is_file()
    )


async def _everything_stored(stack: Stack) -> str:
    """Every key in Valkey, ours or not (the broker's too), with its whole value."""
    client = Redis.from_url(stack.valkey.url)
    try:
        return repr(await redis_contents(client, skip=(), match="*"))
    finally:
        await client.aclose()


async def _create(api: Api, receiver: Receiver, name: str, body: dict[str, Any]) -> dict[str, Any]:
    status, reply, _ = await api.call(
        "POST", "/v1/endpoints", json={"url": receiver.url(name), **body}
    )
    assert status == 201, reply
    created: dict[str, Any] = reply
    receiver.secrets[name] = [created["secret"]]
    api.created_endpoints.append(created["id"])
    return created


async def _headers_seen(api: Api, endpoint_id: str, key: str) -> tuple[Any, Any]:
    """The headers a key is shown, by GET of the endpoint and in the listing."""
    status, one, _ = await api.call("GET", f"/v1/endpoints/{endpoint_id}", key=key)
    assert status == 200, one
    status, page, _ = await api.call("GET", "/v1/endpoints?limit=100", key=key)
    assert status == 200, page
    [listed] = [e for e in page["data"] if e["id"] == endpoint_id]
    return one["headers"], listed["headers"]


async def test_header_values_are_sealed_and_shown_to_writers_only(
    api: Api, receiver: Receiver, stack: Stack
) -> None:
    token = "rcv-" + secrets.token_hex(16)
    tenant = "tenant-" + secrets.token_hex(16)
    # In clear by design: proves the search below does see what was stored.
    marker = "marker-" + secrets.token_hex(16)
    plain = {"Authorization": f"Bearer {token}", "X-Tenant": tenant}
    created = await _create(
        api,
        receiver,
        "hdr",
        {"event_types": ["headers.test"], "description": marker, "headers": plain},
    )
    assert created["headers"] == plain

    async def in_the_aof() -> bool:
        return marker.encode() in _aof(stack)

    await wait_for(in_the_aof)
    stored = await _everything_stored(stack)
    assert marker in stored and "X-Tenant" in stored
    for value in (token, tenant):
        assert value not in stored
        assert value.encode() not in _aof(stack)

    reader = (await make_key(api, ["endpoints:read"]))["key"]
    writer = (await make_key(api, ["endpoints:read", "endpoints:write"]))["key"]
    withheld = {"Authorization": None, "X-Tenant": None}
    assert await _headers_seen(api, created["id"], reader) == (withheld, withheld)
    assert await _headers_seen(api, created["id"], writer) == (plain, plain)
    assert await _headers_seen(api, created["id"], ADMIN_KEY) == (plain, plain)

    event_id = await send_event(api, "headers.test", {"n": 1})

    async def arrived() -> bool:
        return any(r.webhook_id == event_id for r in receiver.for_endpoint("hdr"))

    await wait_for(arrived)
    [got] = [r for r in receiver.for_endpoint("hdr") if r.webhook_id == event_id]
    assert got.verified
    assert (got.headers["Authorization"], got.headers["X-Tenant"]) == (f"Bearer {token}", tenant)


async def test_a_changed_header_value_is_sealed_too(
    api: Api, receiver: Receiver, stack: Stack
) -> None:
    created = await _create(api, receiver, "hdr_patch", {"headers": {"X-Token": "first"}})
    changed = "second-" + secrets.token_hex(16)
    writer = (await make_key(api, ["endpoints:write"]))["key"]
    status, patched, _ = await api.call(
        "PATCH",
        f"/v1/endpoints/{created['id']}",
        json={"headers": {"X-Token": changed}},
        key=writer,
    )
    assert status == 200, patched
    assert patched["headers"] == {"X-Token": changed}
    assert changed not in await _everything_stored(stack)


@pytest.mark.parametrize(
    "name",
    [
        "Forwarded", "X-Real-IP", "Via", "Max-Forwards",
        "X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override", "x-real-ip",
    ],
)  # fmt: skip
async def test_forwarding_and_method_override_headers_are_refused(api: Api, name: str) -> None:
    status, problem, _ = await api.call(
        "POST", "/v1/endpoints", json={"url": "http://127.0.0.1:9/x", "headers": {name: "1"}}
    )
    assert status == 422, problem
    assert problem["errors"][0]["pointer"] == "/headers"
    assert name in problem["errors"][0]["detail"]


@pytest.mark.parametrize("field", ["url", "description"])
@pytest.mark.parametrize("char", ["\x1b", "\r", "\x07", "\x9b", "\u202e"])
async def test_control_characters_in_url_or_description_are_a_422_pointing_at_them(
    api: Api, receiver: Receiver, field: str, char: str
) -> None:
    created = await _create(api, receiver, "ctl", {})
    good = {"url": receiver.url("ctl"), "description": "fine"}
    bad = {**good, field: good[field] + char + "200 OK"}
    for method, path, body in (
        ("POST", "/v1/endpoints", bad),
        ("PATCH", f"/v1/endpoints/{created['id']}", {field: bad[field]}),
    ):
        status, problem, headers = await api.call(method, path, json=body)
        assert status == 422, problem
        assert headers["Content-Type"] == "application/problem+json"
        [error] = problem["errors"]
        assert error["pointer"] == f"/{field}"
        assert f"U+{ord(char):04X}" in error["detail"]
    _, unchanged, _ = await api.call("GET", f"/v1/endpoints/{created['id']}")
    assert (unchanged["url"], unchanged["description"]) == (receiver.url("ctl"), "")
