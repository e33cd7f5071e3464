"""Hostile and malformed input on ingest: each refusal is problem+json, and leaves Redis
exactly as it was (no event, no idempotency claim). A refusal does count against a limited
key's rate (tests/integration/test_api_keys.py): that is what makes refusals cheap."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson
import pytest
from redis.asyncio import Redis

from tests.integration.conftest import Api
from tests.support.apikeys import make_key, outbox_mark, redis_contents
from tests.support.stack import ADMIN_KEY, Stack
from webhook_service.store.connect import async_client

DEPTH = 32  # the default WEBHOOK_MAX_JSON_DEPTH
KEYS = 10_000  # the default WEBHOOK_MAX_JSON_KEYS
NODES = 20_000  # the default WEBHOOK_MAX_JSON_NODES
HEADER_BYTES = 16 * 1024  # the default WEBHOOK_MAX_HEADER_BYTES


@pytest.fixture
async def store(stack: Stack) -> AsyncIterator[Redis]:
    client = async_client(stack.valkey.url)
    yield client
    await client.aclose()


def deep(levels: int) -> bytes:
    """An event whose whole body nests ``levels`` deep (the body itself is level 1)."""
    inner = "[" * (levels - 2) + "]" * (levels - 2)
    return b'{"type": "limits.deep", "data": {"x": ' + inner.encode() + b"}}"


def many_keys(count: int) -> bytes:
    # type and data are 2 keys of the body: data holds the rest.
    data = {f"k{n}": 0 for n in range(count - 2)}
    return orjson.dumps({"type": "limits.keys", "data": data})


def many_values(count: int) -> bytes:
    """``count`` values in all: the body, type, data, the array, and empty objects in it."""
    return b'{"type": "limits.nodes", "data": {"x": [' + b",".join([b"{}"] * (count - 4)) + b"]}}"


VALID = b'{"type": "limits.ok", "data": {}}'

REFUSED: list[tuple[str, bytes, dict[str, str], int, str]] = [
    ("too deep", deep(DEPTH + 1), {}, 422, "json-too-deep"),
    ("deeper than the parser goes", deep(5000), {}, 422, "json-too-deep"),
    ("too many keys", many_keys(KEYS + 1), {}, 422, "json-too-many-keys"),
    ("too many values", many_values(NODES + 1), {}, 422, "json-too-many-nodes"),
    ("80 000 empty objects", many_values(80_000), {}, 422, "json-too-many-nodes"),
    ("too large", b'{"type": "a", "data": {"x": "' + b"y" * 262_144 + b'"}}', {}, 413, ""),
    ("not JSON", b'{"type": "a", "data": ', {}, 400, ""),
    ("text/plain", VALID, {"Content-Type": "text/plain"}, 415, ""),
    ("no content type", VALID, {"Content-Type": ""}, 415, ""),
    ("form", VALID, {"Content-Type": "application/x-www-form-urlencoded"}, 415, ""),
    ("latin-1 JSON", VALID, {"Content-Type": "application/json; charset=latin-1"}, 415, ""),
    ("type with a space", b'{"type": "a b", "data": {}}', {}, 422, ""),
    ("type with an empty segment", b'{"type": "a..b", "data": {}}', {}, 422, ""),
    ("type not ASCII", '{"type": "événement", "data": {}}'.encode(), {}, 422, ""),
    ("type too long", b'{"type": "' + b"a" * 129 + b'", "data": {}}', {}, 422, ""),
    ("type not a string", b'{"type": 7, "data": {}}', {}, 422, ""),
    ("data not an object", b'{"type": "a", "data": [1]}', {}, 422, ""),
    ("unknown field", b'{"type": "a", "data": {}, "extra": 1}', {}, 422, ""),
    ("bad idempotency key", VALID, {"Idempotency-Key": "x" * 256}, 400, ""),
    ("too many headers", VALID, {f"X-Pad-{n}": "1" for n in range(101)}, 431, ""),
    ("headers too large", VALID, {"X-Pad": "y" * HEADER_BYTES}, 431, ""),
]


async def post(
    api: Api, body: bytes, headers: dict[str, str], path: str = "/v1/events", key: str = ADMIN_KEY
) -> tuple[int, str, Any]:
    sent = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    sent.update(headers)
    if sent["Content-Type"] == "":
        del sent["Content-Type"]
    async with api.session.post(api.base + path, data=body, headers=sent) as response:
        text = await response.text()
        return response.status, response.content_type, text


@pytest.mark.parametrize(
    ("body", "headers", "status", "kind"),
    [case[1:] for case in REFUSED],
    ids=[case[0] for case in REFUSED],
)
async def test_refused_as_a_problem_and_nothing_is_stored(
    api: Api, store: Redis, body: bytes, headers: dict[str, str], status: int, kind: str
) -> None:
    # An idempotency key: a refusal must not claim it.
    key = (await make_key(api, ["events:write"]))["key"]
    before, mark = await redis_contents(store), await outbox_mark(store)
    headers = {"Idempotency-Key": "limits-test", **headers}
    got, content_type, text = await post(api, body, headers, key=key)
    assert (got, content_type) == (status, "application/problem+json"), text
    problem = orjson.loads(text)
    assert problem["status"] == status
    if kind:
        assert problem["type"].endswith("/" + kind)
    assert await redis_contents(store) == before
    assert await outbox_mark(store) == mark  # no log record either
    # Claimed by the refused body, the key would now answer 422 (another body's key).
    assert (await post(api, VALID, {"Idempotency-Key": "limits-test"}, key=key))[0] == 202


async def test_at_the_limits_is_accepted(api: Api) -> None:
    assert (await post(api, deep(DEPTH), {}))[0] == 202
    assert (await post(api, many_keys(KEYS), {}))[0] == 202
    assert (await post(api, many_values(NODES), {}))[0] == 202
    assert (await post(api, VALID, {"Content-Type": "application/json; charset=UTF-8"}))[0] == 202
    assert (await post(api, b'{"type": "a.b_c.D9", "data": {}}', {}))[0] == 202


async def test_the_depth_problem_points_at_the_place(api: Api) -> None:
    status, _, text = await post(api, deep(DEPTH + 1), {})
    assert status == 422
    [error] = orjson.loads(text)["errors"]
    assert error["pointer"] == "/data/x" + "/0" * (DEPTH - 2)


async def test_a_long_request_target_is_414(api: Api, store: Redis) -> None:
    before = await redis_contents(store)
    status, content_type, _ = await post(api, VALID, {}, path="/v1/events?" + "q" * HEADER_BYTES)
    assert (status, content_type) == (414, "application/problem+json")
    assert await redis_contents(store) == before


async def test_beyond_twice_the_limit_the_http_parser_refuses(api: Api, store: Redis) -> None:
    # The one refusal that is not problem+json (see api/limits.py): still nothing stored.
    before = await redis_contents(store)
    status, _, _ = await post(api, VALID, {"X-Pad": "y" * (3 * HEADER_BYTES)})
    assert status == 400
    assert await redis_contents(store) == before


async def test_limits_apply_before_authentication(api: Api) -> None:
    async with aiohttp.ClientSession() as session:
        headers = {f"X-Pad-{n}": "1" for n in range(101)}
        async with session.get(api.base + "/v1/endpoints", headers=headers) as response:
            assert response.status == 431
