"""ratelimit.lua through RateLimiter.acquire, on a real Valkey: RateLimitArgs in, 0 (go) or
the ms to wait out, and the limiter's one key as the script leaves it. The limiter's
behaviour over time is tests/integration/test_ratelimit.py's."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from webhook_service.store import keys
from webhook_service.store.ratelimit import RateLimitArgs, RateLimiter
from webhook_service.store.scripts import Scripts

pytestmark = pytest.mark.integration

# A rate so slow that no slot frees while a test runs: the state is then exact.
GLACIAL = 0.001


def test_the_args_are_the_name_the_rate_then_the_burst() -> None:
    assert RateLimitArgs("apikey:k1", 2.5, 3).argv() == [2.5, 3]
    # The limiter's own key, of no bucket: the script's only one.
    assert RateLimitArgs("apikey:k1", 2.5, 3).keys() == [keys.limit("apikey:k1")]


async def test_a_request_that_may_go_is_counted_in_its_key(client: Redis) -> None:
    limiter = RateLimiter(Scripts(client))
    assert await limiter.acquire("script.go", GLACIAL, 2) == 0.0
    first = float(await client.get(keys.limit("script.go")) or 0)
    assert await limiter.acquire("script.go", GLACIAL, 2) == 0.0
    # Each request moves the arrival time on by one interval (1000 s at this rate).
    assert float(await client.get(keys.limit("script.go")) or 0) == pytest.approx(
        first + 1_000_000, abs=1
    )
    # The key expires once it holds nothing back: past its arrival time and a whole burst.
    assert 3_000_000 < await client.pttl(keys.limit("script.go")) <= 4_000_000


async def test_a_refused_request_answers_the_wait_and_counts_nothing(client: Redis) -> None:
    scripts = Scripts(client)
    limiter = RateLimiter(scripts)
    assert await limiter.acquire("script.wait", GLACIAL, 1) == 0.0
    state = await client.get(keys.limit("script.wait"))
    wait = await limiter.acquire("script.wait", GLACIAL, 1)
    assert 990.0 < wait <= 1000.0  # seconds
    # The script's own answer: an integer of ms.
    args = RateLimitArgs("script.wait", GLACIAL, 1)
    reply = await scripts.run("ratelimit", args.keys(), args.argv())
    assert isinstance(reply, int) and 990_000 < reply <= 1_000_000
    assert await client.get(keys.limit("script.wait")) == state
    assert await client.keys("*") == [keys.limit("script.wait")]
