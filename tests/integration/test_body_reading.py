"""Request bodies read whole, as a real network delivers them: in segments with pauses,
in chunks, in two writes far apart; and refused, not half-read, when they are bad.

Loopback hands a small body over in one piece; these tests cut it on purpose, over a raw
socket, and check what was stored byte for byte.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import orjson
import pytest
from redis.asyncio import Redis
from yarl import URL

from tests.integration.conftest import Api
from tests.support.raw_http import RawReply, chunked, pieces, request_head, send_in_pieces
from tests.support.stack import ADMIN_KEY, Stack
from webhook_service.store.events import EventStore
from webhook_service.store.scripts import Scripts

JSON = {"Content-Type": "application/json"}
SEGMENT = 1448  # what one TCP segment carries on an Ethernet path


@pytest.fixture
async def events(stack: Stack) -> AsyncIterator[EventStore]:
    client = Redis.from_url(stack.valkey.url, decode_responses=True)
    yield EventStore(client, Scripts(client))
    await client.aclose()


def event_of(size: int) -> dict[str, object]:
    """An event whose body is about ``size`` bytes, its content varied so that a piece lost
    or repeated anywhere would show."""
    words = [f"w{n:05d}-{'abcdefghij'[n % 10] * (n % 7)}" for n in range(size // 10)]
    text = " ".join(words)[: max(0, size - 60)]
    return {"type": "body.pieces", "data": {"text": text, "n": size}}


async def post_raw(api: Api, parts: list[bytes], gap: float, headers: dict[str, str]) -> RawReply:
    url = URL(api.base)
    assert url.host is not None and url.port is not None
    head = request_head("POST", "/v1/events", headers)
    return await send_in_pieces(url.host, url.port, head, parts, gap)


async def assert_stored_exactly(
    events: EventStore, reply: RawReply, event: dict[str, object]
) -> None:
    assert reply.status == 202, reply.body
    accepted = reply.json()
    assert isinstance(accepted, dict)
    record = await events.get(accepted["id"])
    assert record is not None
    stored = {"type": event["type"], "timestamp": accepted["timestamp"], "data": event["data"]}
    assert record.body == orjson.dumps(stored).decode()


@pytest.mark.parametrize("size", [2_000, 20_000, 100_000, 250_000])
async def test_a_body_in_segments_a_millisecond_apart_is_stored_whole(
    api: Api, events: EventStore, size: int
) -> None:
    event = event_of(size)
    body = orjson.dumps(event)
    headers = {**JSON, "Content-Length": str(len(body))}
    reply = await post_raw(api, pieces(body, SEGMENT), 0.001, headers)
    await assert_stored_exactly(events, reply, event)


async def test_a_body_in_two_writes_far_apart_is_stored_whole(api: Api, events: EventStore) -> None:
    event = event_of(5_000)
    body = orjson.dumps(event)
    half = len(body) // 2
    headers = {**JSON, "Content-Length": str(len(body))}
    reply = await post_raw(api, [body[:half], body[half:]], 0.3, headers)
    await assert_stored_exactly(events, reply, event)


async def test_a_chunked_body_with_pauses_is_stored_whole(api: Api, events: EventStore) -> None:
    event = event_of(30_000)
    body = orjson.dumps(event)
    headers = {**JSON, "Transfer-Encoding": "chunked"}
    reply = await post_raw(api, chunked(pieces(body, 4000)), 0.02, headers)
    await assert_stored_exactly(events, reply, event)


async def test_garbage_after_a_valid_object_is_refused(api: Api) -> None:
    # The object alone would have been accepted: the rest of the declared body is read too.
    valid = orjson.dumps(event_of(200))
    garbage = b' {"and": "more"}'
    headers = {**JSON, "Content-Length": str(len(valid) + len(garbage))}
    reply = await post_raw(api, [valid, garbage], 0.05, headers)
    assert reply.status == 400
    assert reply.headers["content-type"] == "application/problem+json"


async def test_a_body_over_the_cap_in_pieces_is_refused_as_it_grows(api: Api) -> None:
    # Chunked, so no Content-Length announces the size: it is counted as it comes.
    headers = {**JSON, "Transfer-Encoding": "chunked"}
    parts = chunked(pieces(b'{"type": "a.b", "data": "' + b"x" * 300_000 + b'"}', 16_000))
    reply = await post_raw(api, parts, 0.001, headers)
    assert reply.status == 413


async def test_the_sign_in_form_in_two_writes_is_read_whole(api: Api) -> None:
    url = URL(api.base)
    assert url.host is not None and url.port is not None
    form = f"key={ADMIN_KEY}".encode()
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "Content-Length": str(len(form)),
    }
    head = request_head("POST", "/dashboard/login", headers, key=None)
    reply = await send_in_pieces(url.host, url.port, head, [form[:6], form[6:]], 0.3)
    assert reply.status == 303, reply.body
    assert "set-cookie" in reply.headers


async def test_the_sign_in_form_takes_only_a_small_body(api: Api) -> None:
    status, _, headers = await api.call(
        "POST",
        "/dashboard/login",
        key=None,
        data=b"key=" + b"k" * 10_000,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert status == 413
    assert headers["Content-Type"] == "application/problem+json"


async def test_pieces_from_many_clients_at_once_are_kept_apart(
    api: Api, events: EventStore
) -> None:
    sent = [event_of(8_000 + n) for n in range(8)]

    async def post(event: dict[str, object]) -> RawReply:
        body = orjson.dumps(event)
        return await post_raw(
            api, pieces(body, SEGMENT), 0.002, {**JSON, "Content-Length": str(len(body))}
        )

    replies = await asyncio.gather(*(post(event) for event in sent))
    for reply, event in zip(replies, sent, strict=True):
        await assert_stored_exactly(events, reply, event)
