"""endpoint_delete.lua through EndpointStore.delete, on a real Valkey: EndpointDeleteArgs in,
found or not out, and what the script leaves: the endpoint and every key of its own gone,
its sequence number still mapped (its deliveries outlive it)."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from tests.integration.conftest import save_endpoint
from webhook_service.ids import seq_tail
from webhook_service.store import keys
from webhook_service.store.endpoints import EndpointDeleteArgs, EndpointStore
from webhook_service.store.scripts import Scripts
from webhook_service.timeutil import now_ms

pytestmark = pytest.mark.integration

TYPE = "delete.one"


def test_the_args_are_the_endpoint_id() -> None:
    assert EndpointDeleteArgs("ep_1").argv() == ["ep_1"]


async def test_an_endpoint_goes_with_its_keys_and_subscriptions(client: Redis) -> None:
    scripts = Scripts(client)
    endpoint_id = await save_endpoint(scripts, TYPE, now_ms())
    other = await save_endpoint(scripts, TYPE, now_ms())
    await client.hset(keys.endpoint(endpoint_id), "operations", "1")
    await client.sadd(keys.SUB_OPS, endpoint_id)
    own = [
        keys.LUA_KEYS[template] + endpoint_id
        for template in ("inflight", "parked", "rate", "backlog", "ep_stats")
    ]
    for key in own:
        await client.set(key, "1")

    assert await EndpointStore(client, scripts).delete(endpoint_id) is True
    assert not await client.exists(keys.endpoint(endpoint_id), keys.SUB_OPS, *own)
    assert await client.smembers(keys.LUA_KEYS["sub_type"] + TYPE) == {other}
    assert await client.zrange(keys.ENDPOINTS, 0, -1) == [other]
    assert await client.hget(keys.ENDPOINT_SEQS, seq_tail(1)) == endpoint_id


async def test_no_such_endpoint_is_not_found_and_nothing_changes(client: Redis) -> None:
    scripts = Scripts(client)
    endpoint_id = await save_endpoint(scripts, TYPE, now_ms())
    store = EndpointStore(client, scripts)
    assert await store.delete(endpoint_id) is True
    assert await store.delete(endpoint_id) is False
    assert await store.delete("ep_nothere") is False
    assert await scripts.run("endpoint_delete", EndpointDeleteArgs("ep_nothere").argv()) == 0
    # What is left is the sequence counter and the map of the deleted endpoint's tail.
    assert set(await client.keys("*")) == {keys.ENDPOINT_SEQ, keys.ENDPOINT_SEQS}
