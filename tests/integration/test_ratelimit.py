"""The Redis rate limiter (GCRA) against a real Valkey: bursts, waits, atomicity, expiry."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from webhook_service.embedded import EmbeddedValkey
from webhook_service.store import keys
from webhook_service.store.connect import async_client
from webhook_service.store.ratelimit import RateLimiter
from webhook_service.store.scripts import Scripts

pytestmark = pytest.mark.integration

# A rate so slow that no slot frees while a test runs: counts are then exact.
GLACIAL = 0.001


@pytest.fixture
async def client(valkey: EmbeddedValkey) -> AsyncIterator[Redis]:
    redis = async_client(valkey.url)
    yield redis
    await redis.aclose()


@pytest.fixture
def limiter(client: Redis) -> RateLimiter:
    return RateLimiter(Scripts(client))


async def test_a_burst_passes_then_the_next_request_waits(limiter: RateLimiter) -> None:
    assert [await limiter.acquire("burst", 1.0, 3) for _ in range(3)] == [0.0, 0.0, 0.0]
    wait = await limiter.acquire("burst", 1.0, 3)
    assert 0.0 < wait <= 1.0


async def test_a_refused_request_is_not_counted(limiter: RateLimiter) -> None:
    assert await limiter.acquire("refused", GLACIAL, 1) == 0.0
    first = await limiter.acquire("refused", GLACIAL, 1)
    later = [await limiter.acquire("refused", GLACIAL, 1) for _ in range(5)]
    # Had the refusals counted, each wait would grow by a whole interval (1000 s).
    assert all(0 < wait <= first for wait in later)


async def test_waiting_the_given_time_is_enough(limiter: RateLimiter) -> None:
    assert await limiter.acquire("patient", 20.0, 1) == 0.0
    wait = await limiter.acquire("patient", 20.0, 1)
    assert 0.0 < wait <= 0.05
    await asyncio.sleep(wait + 0.005)
    assert await limiter.acquire("patient", 20.0, 1) == 0.0


async def test_fractional_rates_space_requests_more_than_a_second(limiter: RateLimiter) -> None:
    assert await limiter.acquire("slow", 0.5, 1) == 0.0
    assert 1.0 < await limiter.acquire("slow", 0.5, 1) <= 2.0


async def test_names_are_limited_apart(limiter: RateLimiter) -> None:
    assert await limiter.acquire("apart:a", GLACIAL, 1) == 0.0
    assert await limiter.acquire("apart:a", GLACIAL, 1) > 0
    assert await limiter.acquire("apart:b", GLACIAL, 1) == 0.0


async def test_concurrent_callers_on_separate_connections_share_one_limit(
    valkey: EmbeddedValkey,
) -> None:
    clients = [async_client(valkey.url) for _ in range(4)]
    try:
        limiters = [RateLimiter(Scripts(c)) for c in clients]
        waits = await asyncio.gather(
            *(limiters[n % 4].acquire("shared", GLACIAL, 5) for n in range(40))
        )
    finally:
        for c in clients:
            await c.aclose()
    assert waits.count(0.0) == 5


async def test_state_is_one_key_that_expires(limiter: RateLimiter, client: Redis) -> None:
    await limiter.acquire("expiring", 10.0, 2)
    ttl_ms = await client.pttl(keys.limit("expiring"))
    # The state matters for at most (burst + 1) intervals once idle: 300 ms here.
    assert 0 < ttl_ms <= 300


@pytest.mark.parametrize(
    ("rate", "burst"), [(0.0, 1), (-1.0, 1), (float("inf"), 1), (float("nan"), 1), (1.0, 0)]
)
async def test_nonsense_limits_are_refused(limiter: RateLimiter, rate: float, burst: int) -> None:
    with pytest.raises(ValueError, match="rate limit"):
        await limiter.acquire("nonsense", rate, burst)
