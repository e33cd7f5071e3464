"""The scripts run as the functions of one library, loaded again when the server has lost it
(FUNCTION FLUSH, a new primary)."""

from __future__ import annotations

import pytest
import redis
import redis.asyncio

from webhook_service.embedded import EmbeddedValkey
from webhook_service.store import keys
from webhook_service.store.scripts import Scripts, drop_other_releases, library

# ratelimit.lua: KEYS the limiter, ARGV rate per second, burst -> 0 (may go) or the ms to
# wait.
_KEYS = [keys.limit("scripts-reload")]
_ARGS: list[str | int | float] = [0.01, 1]


async def test_a_flushed_library_is_loaded_again(valkey: EmbeddedValkey) -> None:
    client = redis.asyncio.Redis.from_url(valkey.url)
    scripts = Scripts(client)
    assert await scripts.run("ratelimit", _KEYS, _ARGS) == 0
    await client.function_flush()
    assert await scripts.run("ratelimit", _KEYS, _ARGS) > 0  # ran again, and saw the first call
    await client.aclose()


def test_the_same_for_the_sync_client(valkey: EmbeddedValkey) -> None:
    client = redis.Redis.from_url(valkey.url)
    scripts = Scripts(client)
    limiter = [keys.limit("scripts-reload-sync")]
    assert scripts.run_sync("ratelimit", limiter, _ARGS) == 0
    client.function_flush()
    assert scripts.run_sync("ratelimit", limiter, _ARGS) > 0
    client.close()


async def test_the_same_for_calls_in_one_round_trip(valkey: EmbeddedValkey) -> None:
    client = redis.asyncio.Redis.from_url(valkey.url)
    scripts = Scripts(client)
    limiters = [[keys.limit(f"scripts-reload-many-{n}")] for n in range(3)]
    assert await scripts.run_many("ratelimit", [(k, _ARGS) for k in limiters]) == [0, 0, 0]
    await client.function_flush()
    again = await scripts.run_many("ratelimit", [(k, _ARGS) for k in limiters])
    assert all(wait > 0 for wait in again)  # each ran again, and saw its first call
    # A call the server refuses fails in its place; the others' replies stand.
    refused = await scripts.run_many("ratelimit", [(limiters[0], _ARGS), (limiters[1], ["x", 1])])
    assert refused[0] > 0 and isinstance(refused[1], redis.ResponseError)
    await client.aclose()


def test_another_releases_library_stands_beside_this_ones(valkey: EmbeddedValkey) -> None:
    # A rolling restart: the processes of two releases share the server, each calling the
    # functions of its own library.
    client = redis.Redis.from_url(valkey.url)
    ours = library()
    digest = ours.name.removeprefix("webhook_")
    theirs = ours.code.replace(digest, "0" * len(digest))
    client.function_load(theirs)
    limiter = [keys.limit("scripts-two-releases")]
    assert Scripts(client).run_sync("ratelimit", limiter, _ARGS) == 0  # loads ours
    assert _libraries(client) == {ours.name, f"webhook_{'0' * len(digest)}"}
    # Theirs runs beside ours, on the same keys: it sees the call ours made.
    assert client.fcall(f"webhook_ratelimit_{'0' * len(digest)}", 1, *limiter, *_ARGS) > 0
    # Deleting theirs leaves ours, and a process of theirs still running loads it again.
    for other in ("not_ours", "webhook_not_ours"):  # another application's, on the server
        client.function_load(f"#!lua name={other}\nredis.register_function('{other}', {_NOOP})")
    assert drop_other_releases(client) == [f"webhook_{'0' * len(digest)}"]
    assert _libraries(client) == {ours.name, "not_ours", "webhook_not_ours"}
    assert drop_other_releases(client) == []
    client.close()


_NOOP = "function() return 1 end"


def test_a_key_template_in_a_call_of_no_bucket_is_refused_by_name(
    valkey: EmbeddedValkey,
) -> None:
    client = redis.Redis.from_url(valkey.url)
    # lease.lua builds its keys from K; a KEYS[1] of no bucket gives it none.
    lease: list[str | int | float] = [0, "t", 60_000, 1, 0, "dlv_x"]
    with pytest.raises(redis.ResponseError, match=r"of no bucket, so there is no K\.delivery"):
        Scripts(client).run_sync("lease", [keys.limit("no-bucket")], lease)
    client.close()


def _libraries(client: redis.Redis) -> set[str]:
    return {dict(zip(lib[::2], lib[1::2], strict=True))[b"library_name"].decode()
            for lib in client.function_list()}  # fmt: skip
