"""API keys for integration tests, and a full picture of what Redis holds."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from redis.asyncio import Redis

from tests.integration.conftest import Api
from webhook_service.api.scopes import Scope
from webhook_service.store import keys

# A rate no test outlasts: after one event, the next waits far longer than any test runs.
GLACIAL_RATE = 0.001


async def make_key(
    api: Api,
    scopes: Sequence[str],
    rate_limit: float | None = None,
    name: str = "test",
    application: str | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "scopes": list(scopes)}
    if rate_limit is not None:
        body["rate_limit"] = rate_limit
    if application is not None:
        body["application"] = application
    status, created, _ = await api.call("POST", "/v1/api-keys", json=body)
    assert status == 201, created
    return cast(dict[str, Any], created)


def all_but(scope: Scope) -> list[str]:
    """Every scope except ``scope`` and admin (which implies it)."""
    return [s.value for s in Scope if s not in (scope, Scope.ADMIN)]


# Bookkeeping that changes on its own or counts requests (refusals too): not stored data.
# Written by the running processes on their own clock (locks, liveness, counters), not by
# the requests a test makes.
BOOKKEEPING = (
    keys.SCHEDULERS,
    keys.SCHEDULER_PASSES,
    *(keys.bucket_lease(b) for b in keys.all_buckets()),
    *(keys.metrics(b) for b in keys.all_buckets()),
    keys.HEARTBEATS,
    keys.TICK_LOCK,
    # The shipper trims the outbox and lets finished work go on its own clock too; whether
    # a request appended to the outbox is `outbox_mark`'s to say.
    keys.LOG_UPKEEP_LOCK,
    *(keys.outbox(b) for b in keys.all_buckets()),
    *(keys.release(b) for b in keys.all_buckets()),
    # The operational events other buckets ask for, which the shipper makes on its clock.
    *(keys.ops_requests(b) for b in keys.all_buckets()),
)


async def outbox_mark(client: Redis) -> str:
    """The id of the last record ever appended to each bucket's log outbox (trimming keeps
    it), as one text."""
    marks = []
    for bucket in keys.all_buckets():
        if await client.exists(keys.outbox(bucket)):
            info = await client.xinfo_stream(keys.outbox(bucket))
            mark = info["last-generated-id"]
            marks.append(f"{bucket}:{mark.decode() if isinstance(mark, bytes) else mark}")
    return ",".join(marks)


async def redis_contents(
    client: Redis, *, skip: Sequence[str] = BOOKKEEPING, match: str = keys.PREFIX + "*"
) -> dict[str, Any]:
    """Every key of ours (or every one ``match`` names) but ``skip``, with its type and
    whole value."""
    contents: dict[str, Any] = {}
    async for raw in client.scan_iter(match=match, count=1000):
        key = raw.decode() if isinstance(raw, bytes) else str(raw)
        if key in skip:
            continue
        kind = await client.type(key)
        kind = kind.decode() if isinstance(kind, bytes) else kind
        if kind == "string":
            value: Any = await client.get(key)
        elif kind == "hash":
            value = await client.hgetall(key)
        elif kind == "list":
            value = await client.lrange(key, 0, -1)
        elif kind == "set":
            value = sorted(await client.smembers(key))
        elif kind == "zset":
            value = await client.zrange(key, 0, -1, withscores=True)
        else:
            value = kind
        contents[key] = (kind, value)
    return contents
