"""Scripts run by SHA and are loaded again when the server has lost them (restart, flush)."""

from __future__ import annotations

import redis
import redis.asyncio

from webhook_service.embedded import EmbeddedValkey
from webhook_service.store import keys
from webhook_service.store.scripts import Scripts

# ratelimit.lua: KEYS the limiter, ARGV rate per second, burst -> 0 (may go) or the ms to
# wait.
_KEYS = [keys.limit("scripts-reload")]
_ARGS: list[str | int | float] = [0.01, 1]


async def test_a_flushed_script_cache_is_loaded_again(valkey: EmbeddedValkey) -> None:
    client = redis.asyncio.Redis.from_url(valkey.url)
    scripts = Scripts(client)
    assert await scripts.run("ratelimit", _KEYS, _ARGS) == 0
    await client.script_flush()
    assert await scripts.run("ratelimit", _KEYS, _ARGS) > 0  # ran again, and saw the first call
    await client.aclose()


def test_the_same_for_the_sync_client(valkey: EmbeddedValkey) -> None:
    client = redis.Redis.from_url(valkey.url)
    scripts = Scripts(client)
    limiter = [keys.limit("scripts-reload-sync")]
    assert scripts.run_sync("ratelimit", limiter, _ARGS) == 0
    client.script_flush()
    assert scripts.run_sync("ratelimit", limiter, _ARGS) > 0
    client.close()


async def test_the_same_for_calls_in_one_round_trip(valkey: EmbeddedValkey) -> None:
    client = redis.asyncio.Redis.from_url(valkey.url)
    scripts = Scripts(client)
    limiters = [[keys.limit(f"scripts-reload-many-{n}")] for n in range(3)]
    assert await scripts.run_many("ratelimit", [(k, _ARGS) for k in limiters]) == [0, 0, 0]
    await client.script_flush()
    again = await scripts.run_many("ratelimit", [(k, _ARGS) for k in limiters])
    assert all(wait > 0 for wait in again)  # each ran again, and saw its first call
    # A call the server refuses fails in its place; the others' replies stand.
    refused = await scripts.run_many("ratelimit", [(limiters[0], _ARGS), (limiters[1], ["x", 1])])
    assert refused[0] > 0 and isinstance(refused[1], redis.ResponseError)
    await client.aclose()
