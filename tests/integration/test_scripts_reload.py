"""Scripts run by SHA and are loaded again when the server has lost them (restart, flush)."""

from __future__ import annotations

import redis
import redis.asyncio

from webhook_service.embedded import EmbeddedValkey
from webhook_service.store.scripts import Scripts

# ratelimit.lua: ARGV limit name, rate per second, burst -> 0 (may go) or the ms to wait.
_ARGS: list[str | int | float] = ["scripts-reload", 0.01, 1]


async def test_a_flushed_script_cache_is_loaded_again(valkey: EmbeddedValkey) -> None:
    client = redis.asyncio.Redis.from_url(valkey.url)
    scripts = Scripts(client)
    assert await scripts.run("ratelimit", _ARGS) == 0
    await client.script_flush()
    assert await scripts.run("ratelimit", _ARGS) > 0  # ran again, and saw the first call
    await client.aclose()


def test_the_same_for_the_sync_client(valkey: EmbeddedValkey) -> None:
    client = redis.Redis.from_url(valkey.url)
    scripts = Scripts(client)
    args: list[str | int | float] = ["scripts-reload-sync", 0.01, 1]
    assert scripts.run_sync("ratelimit", args) == 0
    client.script_flush()
    assert scripts.run_sync("ratelimit", args) > 0
    client.close()
