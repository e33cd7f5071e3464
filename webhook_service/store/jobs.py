"""Background jobs, as Redis keeps them: a bulk retry by filter, an endpoint recovery, and
clearing what a deleted application held.

A retry or a recovery is a filter over the delivery history, the statuses it re-sends, and
a cursor. It advances a page at a time (api/jobs.py pages the log), saving the cursor after
each, so whichever API process holds the job's owner key can resume it after a crash; a
page run twice re-sends nothing twice, since a delivery it already put back is pending, and
pending ones are skipped. The filter is kept as the text the history gave (its JSON): the
store never reads it.

A deletion (``delete-application``) goes through ``DeleteStep`` in order, saving after each
call where it is (``Deletion``: the step, its scan cursor, the outbox mark it waits for) and
what it has done so far; every call is safe to run twice, so a job cut short resumes from
its last save. Its hash holds, beside kind, state, created and updated (filter, statuses,
cursor, matched and retried are empty or 0): app, step, scan, mark, since, and the counts
endpoints, ended, events, deliveries, attempts and keys (API keys revoked).
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal, cast

from redis.asyncio import Redis
from redis.exceptions import WatchError
from redis.typing import EncodableT, FieldT

from webhook_service.ids import new_id
from webhook_service.store import keys

JobKind = Literal["retry", "recover", "delete-application"]
JobState = Literal["running", "done"]
DELETE_APPLICATION: JobKind = "delete-application"


class DeleteStep(StrEnum):
    """Where a deletion is, in the order it goes (api/jobs.py says what each does)."""

    CLOSE = "close"  # the application's record and its keys' access gone
    DELIVERIES = "deliveries"  # its pending deliveries being ended
    ENDPOINTS = "endpoints"  # its endpoints being deleted
    LOG = "log"  # waiting for the log to hold what the ends wrote
    HISTORY = "history"  # its history being deleted from the log
    KEYS = "keys"  # what is left in Redis under its name being deleted
    DONE = "done"


@dataclass(frozen=True)
class Deletion:
    """A deletion job's place and progress."""

    application: str
    step: DeleteStep = DeleteStep.CLOSE
    scan: str = "0"  # the step's SCAN/ZSCAN cursor ("0": from the start)
    mark: str = ""  # LOG: the last outbox record the log must hold first
    since_ms: int = 0  # when the step began
    endpoints: int = 0  # endpoints deleted
    ended: int = 0  # pending deliveries ended (failed, application_deleted)
    events: int = 0  # events deleted from the log
    deliveries: int = 0  # deliveries deleted from the log
    attempts: int = 0  # attempts deleted from the log
    api_keys: int = 0  # API keys bound to it, revoked

    def advanced(self, step: DeleteStep, now_ms: int) -> Deletion:
        """At the start of ``step``."""
        return dataclasses.replace(self, step=step, scan="0", since_ms=now_ms)

    def fields(self) -> dict[FieldT, EncodableT]:
        return {
            "app": self.application, "step": self.step.value, "scan": self.scan,
            "mark": self.mark, "since": self.since_ms, "endpoints": self.endpoints,
            "ended": self.ended, "events": self.events, "deliveries": self.deliveries,
            "attempts": self.attempts, "keys": self.api_keys,
        }  # fmt: skip

    @classmethod
    def from_hash(cls, raw: dict[str, str]) -> Deletion:
        return cls(
            application=raw["app"], step=DeleteStep(raw["step"]), scan=raw["scan"],
            mark=raw["mark"], since_ms=int(raw["since"]), endpoints=int(raw["endpoints"]),
            ended=int(raw["ended"]), events=int(raw["events"]),
            deliveries=int(raw["deliveries"]), attempts=int(raw["attempts"]),
            api_keys=int(raw["keys"]),
        )  # fmt: skip


@dataclass(frozen=True)
class JobRecord:
    id: str
    kind: JobKind
    state: JobState
    filter: str  # history/filters.py DeliveryFilter.to_json(); '' for a deletion
    statuses: tuple[str, ...]
    cursor: str | None
    matched: int  # deliveries examined that were in one of the statuses
    retried: int  # of those, put back to pending
    created_ms: int
    updated_ms: int
    deletion: Deletion | None = None  # a delete-application job's


def _from_hash(job_id: str, raw: dict[str, str]) -> JobRecord:
    kind = cast(JobKind, raw["kind"])
    return JobRecord(
        id=job_id,
        kind=kind,
        state=cast(JobState, raw["state"]),
        filter=raw["filter"],
        statuses=tuple(s for s in raw["statuses"].split(",") if s),
        cursor=raw.get("cursor") or None,
        matched=int(raw["matched"]),
        retried=int(raw["retried"]),
        created_ms=int(raw["created"]),
        updated_ms=int(raw["updated"]),
        deletion=Deletion.from_hash(raw) if kind == DELETE_APPLICATION else None,
    )


class JobStore:
    def __init__(self, redis: Redis, ttl_s: int) -> None:
        self._redis = redis
        self._ttl_s = ttl_s  # how long a finished job stays readable

    async def create(
        self, kind: JobKind, query: str, statuses: Sequence[str], now_ms: int
    ) -> JobRecord:
        return await self._create(kind, query, statuses, now_ms, {})

    async def create_deletion(
        self, app_id: str, now_ms: int, lease_ms: int
    ) -> tuple[JobRecord, str]:
        """A job that clears what the application held, from its first step, owned by the
        caller (the token returned) for ``lease_ms``: no process runs it before the caller
        releases it, or dies and the lease runs out."""
        token = secrets.token_hex(8)
        fields = Deletion(app_id, since_ms=now_ms).fields()
        owner = (token, lease_ms)
        return await self._create(DELETE_APPLICATION, "", (), now_ms, fields, owner), token

    async def _create(
        self,
        kind: JobKind,
        query: str,
        statuses: Sequence[str],
        now_ms: int,
        more: dict[FieldT, EncodableT],
        owner: tuple[str, int] | None = None,
    ) -> JobRecord:
        job_id = new_id("job", now_ms)
        async with self._redis.pipeline(transaction=True) as pipe:
            if owner is not None:
                token, lease_ms = owner
                pipe.set(keys.job_owner(job_id), token, px=lease_ms)
            fields: dict[FieldT, EncodableT] = {
                "kind": kind,
                "state": "running",
                "filter": query,
                "statuses": ",".join(statuses),
                "cursor": "",
                "matched": 0,
                "retried": 0,
                "created": now_ms,
                "updated": now_ms,
                **more,
            }
            pipe.hset(keys.job(job_id), mapping=fields)
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

    async def release(self, job_id: str, token: str) -> None:
        """Give the job up (this process is stopping), if it is still ours: another
        process may take it at once rather than when the lease runs out."""
        owner = keys.job_owner(job_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            try:
                await pipe.watch(owner)
                if await pipe.get(owner) != token:
                    return
                pipe.multi()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
                pipe.delete(owner)
                await pipe.execute()
            except WatchError:
                return  # it changed hands meanwhile: no longer ours to give up

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
        await self._write(
            after,
            {"cursor": after.cursor or "", "matched": after.matched, "retried": after.retried},
        )
        return after

    async def save_deletion(self, job: JobRecord, now_ms: int, deletion: Deletion) -> JobRecord:
        """A deletion's place and progress after one call; done at DeleteStep.DONE."""
        done = deletion.step is DeleteStep.DONE
        after = dataclasses.replace(
            job, state="done" if done else "running", deletion=deletion, updated_ms=now_ms
        )
        await self._write(after, deletion.fields())
        return after

    async def _write(self, after: JobRecord, fields: dict[FieldT, EncodableT]) -> None:
        async with self._redis.pipeline(transaction=True) as pipe:
            changed: dict[FieldT, EncodableT] = {
                "state": after.state,
                "updated": after.updated_ms,
                **fields,
            }
            pipe.hset(keys.job(after.id), mapping=changed)
            if after.state == "done":
                pipe.srem(keys.JOBS_RUNNING, after.id)
                pipe.expire(keys.job(after.id), self._ttl_s)
                pipe.delete(keys.job_owner(after.id))
            await pipe.execute()
