"""endpoint_state.lua through EndpointStore.set_disabled, on a real Valkey:
EndpointStateArgs in, found or not out, and the endpoint's disabled fields as the script
leaves them."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from tests.integration.conftest import save_endpoint
from webhook_service.store import keys
from webhook_service.store.endpoints import EndpointStateArgs, EndpointStore
from webhook_service.store.scripts import Scripts
from webhook_service.timeutil import now_ms

pytestmark = pytest.mark.integration

FIELDS = ("disabled", "disabled_reason", "disabled_at", "failing_since", "updated")


def test_the_args_are_the_id_the_flag_then_the_time() -> None:
    assert EndpointStateArgs("ep_1", True, 5).argv() == ["ep_1", 1, 5]
    assert EndpointStateArgs("ep_1", False, 5).argv() == ["ep_1", 0, 5]


async def test_disabling_then_enabling_an_endpoint(client: Redis) -> None:
    scripts = Scripts(client)
    at = now_ms()
    endpoint_id = await save_endpoint(scripts, "state.one", at)
    key = keys.endpoint(endpoint_id)
    await client.hset(key, "failing_since", at)
    store = EndpointStore(client, scripts)

    assert await store.set_disabled(endpoint_id, True, at + 1) is True
    assert await client.hmget(key, FIELDS) == ["1", "manual", str(at + 1), str(at), str(at + 1)]
    # Disabled already: found, and its reason and time stay.
    assert await store.set_disabled(endpoint_id, True, at + 2) is True
    assert await client.hmget(key, FIELDS) == ["1", "manual", str(at + 1), str(at), str(at + 1)]

    # Enabling forgets the failing streak too.
    assert await store.set_disabled(endpoint_id, False, at + 3) is True
    assert await client.hmget(key, FIELDS) == ["0", None, None, None, str(at + 3)]


async def test_no_such_endpoint_is_not_found_and_not_made(client: Redis) -> None:
    scripts = Scripts(client)
    store = EndpointStore(client, scripts)
    for disabled in (True, False):
        assert await store.set_disabled("ep_nothere", disabled, now_ms()) is False
    args = EndpointStateArgs("ep_nothere", True, now_ms())
    assert await scripts.run("endpoint_state", args.keys(), args.argv()) == 0
    assert not await client.exists(keys.endpoint("ep_nothere"))
