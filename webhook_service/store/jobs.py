"""Background jobs that retry many deliveries, as Redis keeps them: a bulk retry by filter,
an endpoint recovery.

A job is a filter over the delivery history, the statuses it re-sends, and a cursor. It
advances a page at a time (api/jobs.py pages the log), saving the cursor after each, so
whichever API process holds the job's owner key can resume it after a crash; a page run
twice re-sends nothing twice, since a delivery it already put back is pending, and pending
ones are skipped. The filter is kept as the text the history gave (its JSON): the store
never reads it.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, cast

from redis.asyncio import Redis

from webhook_service.ids import new_id
from webhook_service.store import keys

JobKind = Literal["retry", "recover"]
JobState = Literal["running", "done"]


@dataclass(frozen=True)
class JobRecord:
    id: str
    kind: JobKind
    state: JobState
    filter: str  # history/filters.py DeliveryFilter.to_json()
    statuses: tuple[str, ...]
    cursor: str | None
    matched: int  # deliveries examined that were in one of the statuses
    retried: int  # of those, put back to pending
    created_ms: int
    updated_ms: int


def _from_hash(job_id: str, raw: dict[str, str]) -> JobRecord:
    return JobRecord(
        id=job_id,
        kind=cast(JobKind, raw["kind"]),
        state=cast(JobState, raw["state"]),
        filter=raw["filter"],
        statuses=tuple(raw["statuses"].split(",")),
        cursor=raw.get("cursor") or None,
        matched=int(raw["matched"]),
        retried=int(raw["retried"]),
        created_ms=int(raw["created"]),
        updated_ms=int(raw["updated"]),
    )


class JobStore:
    def __init__(self, redis: Redis, ttl_s: int) -> None:
        self._redis = redis
        self._ttl_s = ttl_s  # how long a finished job stays readable

    async def create(
        self, kind: JobKind, query: str, statuses: Sequence[str], now_ms: int
    ) -> JobRecord:
        job_id = new_id("job", now_ms)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(
                keys.job(job_id),
                mapping={
                    "kind": kind,
                    "state": "running",
                    "filter": query,
                    "statuses": ",".join(statuses),
                    "cursor": "",
                    "matched": 0,
                    "retried": 0,
                    "created": now_ms,
                    "updated": now_ms,
                },
            )
            pipe.sadd(keys.JOBS_RUNNING, job_id)
            await pipe.execute()
        record = await self.get(job_id)
        assert record is not None
        return record

    async def get(self, job_id: str) -> JobRecord | None:
        raw = cast(dict[str, str], await self._redis.hgetall(keys.job(job_id)))
        return _from_hash(job_id, raw) if raw else None

    async def running(self) -> list[str]:
        return sorted(cast(set[str], await self._redis.smembers(keys.JOBS_RUNNING)))

    async def claim(self, job_id: str, lease_ms: int) -> str | None:
        """An owner token if this process may work on the job now."""
        token = secrets.token_hex(8)
        claimed = await self._redis.set(keys.job_owner(job_id), token, nx=True, px=lease_ms)
        return token if claimed else None

    async def hold(self, job_id: str, token: str, lease_ms: int) -> bool:
        """Whether this process still owns the job; if so, for lease_ms more."""
        owner = keys.job_owner(job_id)
        if await self._redis.get(owner) != token:
            return False
        await self._redis.pexpire(owner, lease_ms)
        return True

    async def save(
        self, job: JobRecord, now_ms: int, *, matched: int, retried: int, cursor: str | None
    ) -> JobRecord:
        """A page done: ``matched`` more deliveries in the job's statuses, ``retried`` of them
        put back to pending, and where the next page starts (None: the job is done)."""
        done = cursor is None
        after = dataclasses.replace(
            job,
            state="done" if done else "running",
            cursor=cursor,
            matched=job.matched + matched,
            retried=job.retried + retried,
            updated_ms=now_ms,
        )
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(
                keys.job(job.id),
                mapping={
                    "state": after.state,
                    "cursor": after.cursor or "",
                    "matched": after.matched,
                    "retried": after.retried,
                    "updated": now_ms,
                },
            )
            if done:
                pipe.srem(keys.JOBS_RUNNING, job.id)
                pipe.expire(keys.job(job.id), self._ttl_s)
                pipe.delete(keys.job_owner(job.id))
            await pipe.execute()
        return after
