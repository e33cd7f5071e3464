"""endpoint_save.lua through EndpointStore.save, on a real Valkey: EndpointSaveArgs in,
SaveOutcome out (created, updated, limit_reached), and the endpoint, its sequence number
and its subscriptions as the script leaves them."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from webhook_service.ids import new_id, seq_tail
from webhook_service.store import keys
from webhook_service.store.endpoints import (
    EndpointLimitReached,
    EndpointRecord,
    EndpointSaveArgs,
    EndpointStore,
    SaveOutcome,
    SealedSecret,
)
from webhook_service.store.scripts import Scripts
from webhook_service.timeutil import now_ms

pytestmark = pytest.mark.integration

ONE, TWO = "save.one", "save.two"


def _record(event_types: list[str] | None, *, operations: bool = False) -> EndpointRecord:
    at = now_ms()
    return EndpointRecord(
        id=new_id("ep", at), url="http://127.0.0.1:9/x", description="first",
        event_types=event_types, disabled=False, created_ms=at, updated_ms=at,
        secrets=[SealedSecret("v1:sealed")], operations=operations,
    )  # fmt: skip


def _subscribed(kind: str) -> str:
    return keys.LUA_KEYS["sub_type"] + kind


def test_the_args_are_the_id_the_limit_then_the_field_pairs() -> None:
    args = EndpointSaveArgs("ep_1", 3, {"url": "http://x", "created": 5})
    assert args.argv() == ["ep_1", 3, "url", "http://x", "created", 5]


async def test_a_new_endpoint_is_created_with_the_next_sequence_number(client: Redis) -> None:
    store = EndpointStore(client, Scripts(client))
    first, second = _record([ONE, TWO]), _record(None)
    assert await store.save(first, creating=True) is SaveOutcome.CREATED
    assert await store.save(second, creating=True) is SaveOutcome.CREATED

    raw = await client.hgetall(keys.endpoint(first.id))
    assert (raw["url"], raw["event_types"], raw["disabled"], raw["seq"]) == (
        "http://127.0.0.1:9/x", f'["{ONE}","{TWO}"]', "0", "1",
    )  # fmt: skip
    assert await client.hget(keys.endpoint(second.id), "seq") == "2"
    assert await client.hgetall(keys.ENDPOINT_SEQS) == {
        seq_tail(1): first.id, seq_tail(2): second.id,
    }  # fmt: skip
    assert set(await client.zrange(keys.ENDPOINTS, 0, -1, withscores=True)) == {
        (first.id, 0.0), (second.id, 0.0),
    }  # fmt: skip
    assert await client.smembers(_subscribed(ONE)) == {first.id}
    assert await client.smembers(_subscribed(TWO)) == {first.id}
    assert await client.smembers(keys.SUB_ALL) == {second.id}  # no types: every type
    assert not await client.exists(keys.SUB_OPS)


async def test_an_update_moves_the_subscriptions_and_keeps_the_sequence_number(
    client: Redis,
) -> None:
    store = EndpointStore(client, Scripts(client))
    record = _record([ONE])
    assert await store.save(record, creating=True) is SaveOutcome.CREATED

    record.event_types, record.operations, record.description = [TWO], True, "second"
    record.secrets = [SealedSecret("v1:not-written")]
    assert await store.save(record, creating=False) is SaveOutcome.UPDATED
    raw = await client.hgetall(keys.endpoint(record.id))
    assert (raw["description"], raw["operations"], raw["seq"]) == ("second", "1", "1")
    assert raw["secrets"] == '[{"k":"v1:sealed","exp":null}]'  # only creation writes them
    assert await client.get(keys.ENDPOINT_SEQ) == "1"
    assert not await client.exists(_subscribed(ONE))
    assert await client.smembers(_subscribed(TWO)) == {record.id}
    assert await client.smembers(keys.SUB_OPS) == {record.id}

    record.event_types, record.operations = None, False
    assert await store.save(record, creating=False) is SaveOutcome.UPDATED
    assert not await client.exists(_subscribed(TWO), keys.SUB_OPS)
    assert await client.smembers(keys.SUB_ALL) == {record.id}


async def test_past_the_limit_a_new_endpoint_is_refused_and_nothing_written(
    client: Redis,
) -> None:
    scripts = Scripts(client)
    store = EndpointStore(client, scripts)
    kept = _record([ONE])
    assert await store.save(kept, creating=True, max_endpoints=1) is SaveOutcome.CREATED

    refused = _record([TWO])
    with pytest.raises(EndpointLimitReached):
        await store.save(refused, creating=True, max_endpoints=1)
    # The script's own answer, for the same arguments.
    args = EndpointSaveArgs(refused.id, 1, {"url": refused.url, "event_types": ""})
    assert await scripts.run("endpoint_save", args.argv()) == SaveOutcome.LIMIT_REACHED
    assert not await client.exists(keys.endpoint(refused.id), _subscribed(TWO), keys.SUB_ALL)
    assert await client.zrange(keys.ENDPOINTS, 0, -1) == [kept.id]
    assert await client.get(keys.ENDPOINT_SEQ) == "1"

    # Changing an endpoint adds none: at the limit it still works.
    kept.description = "changed"
    assert await store.save(kept, creating=False, max_endpoints=1) is SaveOutcome.UPDATED
    assert await client.hget(keys.endpoint(kept.id), "description") == "changed"
