"""endpoint_delete.lua through EndpointStore.delete, on a real Valkey: EndpointDeleteArgs in,
found or not out, and what the script leaves: the endpoint and every key of its own gone,
its sequence number still mapped (its deliveries outlive it)."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from tests.integration.conftest import save_endpoint
from tests.integration.store.tenants import app_endpoint, new_app
from webhook_service.ids import seq_tail
from webhook_service.store import keys
from webhook_service.store.applications import DEFAULT_APP_ID, DEFAULT_APP_UID
from webhook_service.store.endpoints import EndpointDeleteArgs, EndpointStore
from webhook_service.store.scripts import Scripts
from webhook_service.timeutil import now_ms

pytestmark = pytest.mark.integration

TYPE = "delete.one"


def test_the_args_are_the_endpoint_id() -> None:
    assert EndpointDeleteArgs("ep_1").argv() == ["ep_1"]
    assert EndpointDeleteArgs("ep_1").keys() == [keys.endpoint("ep_1")]


async def test_an_endpoint_goes_with_its_keys_and_subscriptions(client: Redis) -> None:
    scripts = Scripts(client)
    endpoint_id = await save_endpoint(scripts, TYPE, now_ms())
    other = await save_endpoint(scripts, TYPE, now_ms())
    await client.hset(keys.endpoint(endpoint_id), "operations", "1")
    await client.sadd(keys.sub_ops(), endpoint_id)
    own = [
        keys.in_bucket(keys.bucket_of(endpoint_id), template, endpoint_id)
        for template in ("inflight", "parked", "rate", "backlog", "ep_stats")
    ]
    for key in own:
        await client.set(key, "1")

    assert await EndpointStore(client, scripts).delete(endpoint_id) is True
    assert not await client.exists(keys.endpoint(endpoint_id), keys.sub_ops(), *own)
    assert await client.smembers(keys.sub_type(DEFAULT_APP_ID, TYPE)) == {other}
    assert await client.zrange(keys.endpoints(0), 0, -1) == [other]
    assert await client.zrange(keys.app_endpoints(DEFAULT_APP_ID), 0, -1) == [other]
    assert await client.hget(keys.endpoint_seqs(0), seq_tail(1)) == endpoint_id


async def test_an_endpoint_leaves_its_applications_sets(client: Redis) -> None:
    scripts = Scripts(client)
    app_id = await new_app(client, now_ms())
    typed = await app_endpoint(scripts, app_id, [TYPE, "delete.two"], now_ms(), ["c"])
    every = await app_endpoint(scripts, app_id, None, now_ms())
    store = EndpointStore(client, scripts)

    assert await store.delete(typed) is True
    assert not await client.exists(keys.sub_type(app_id, TYPE), keys.sub_type(app_id, "delete.two"))
    assert await client.zrange(keys.app_endpoints(app_id), 0, -1) == [every]
    assert await store.delete(every) is True
    assert not await client.exists(keys.sub_all(app_id), keys.app_endpoints(app_id))
    assert await client.exists(keys.app(app_id))  # the application stays


async def test_no_such_endpoint_is_not_found_and_nothing_changes(client: Redis) -> None:
    scripts = Scripts(client)
    endpoint_id = await save_endpoint(scripts, TYPE, now_ms())
    store = EndpointStore(client, scripts)
    assert await store.delete(endpoint_id) is True
    assert await store.delete(endpoint_id) is False
    assert await store.delete("ep_nothere") is False
    args = EndpointDeleteArgs("ep_nothere")
    assert await scripts.run("endpoint_delete", args.keys(), args.argv()) == 0
    # What is left is the sequence counter, the map of the deleted endpoint's tail, and its
    # application, which its first endpoint made.
    assert set(await client.keys("*")) == {
        keys.endpoint_seq(0), keys.endpoint_seqs(0), keys.app(DEFAULT_APP_ID), keys.apps(0),
        keys.apps_uid(DEFAULT_APP_UID),
    }  # fmt: skip
