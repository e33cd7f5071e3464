"""Deliveries: leases, attempt records, retries, and reading the records back from Redis."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any, cast

import orjson
from redis.asyncio import Redis

from webhook_service.ids import delivery_event, delivery_tail, id_time_ms, new_id, tail_endpoint
from webhook_service.store import keys
from webhook_service.store.batch import ScriptBatch
from webhook_service.store.endpoints import decode_schedule, decode_timeout
from webhook_service.store.scripts import Scripts
from webhook_service.store.states import Status, shown_status
from webhook_service.timeutil import iso

if TYPE_CHECKING:  # counts.py imports this module for RecordOutcome
    from webhook_service.store.counts import AttemptCounts


def _bucket(entry: str) -> int:
    """A lease's entry's bucket: a delivery id's, or, for a wake-up's '+<task id>' (the ids
    that joined it), the bucket of the event whose id the task's starts with."""
    return keys.bucket_of(entry[1:] if entry.startswith("+") else entry)


def _one_bucket(entries: Sequence[str]) -> int:
    """The bucket every entry is of: one script call acts in one bucket."""
    found = {_bucket(e) for e in entries}
    if len(found) != 1:
        raise ValueError(f"one call, one bucket: these ids are of buckets {sorted(found)}")
    return found.pop()


def _by_bucket(entries: Sequence[str]) -> dict[int, list[str]]:
    groups: dict[int, list[str]] = {}
    for entry in entries:
        groups.setdefault(_bucket(entry), []).append(entry)
    return groups


@dataclass(frozen=True)
class Job:
    """A leased delivery with everything needed to send it."""

    delivery_id: str
    attempt: int  # the number this attempt will have
    event_id: str
    endpoint_id: str
    body: str
    url: str
    sealed_secrets: str
    sealed_headers: str  # the endpoint's own extra headers, as stored (values sealed)
    # The endpoint's own retry policy, read with it (None: the global setting's).
    retry_schedule: tuple[float, ...] | None = None
    timeout_seconds: float | None = None
    # The head of a FIFO endpoint's line: the next one goes once this one ends.
    ordered: bool = False
    # The producer's W3C traceparent, kept with the event; None: it sent none.
    traceparent: str | None = None
    # The endpoint's send_traceparent: the request carries a traceparent header.
    send_traceparent: bool = False

    def lease_ms(self, base_ms: int) -> int:
        """How long common.lua lease_one leased it for, given the ``base_ms`` asked for
        (which covers the global request timeout): the endpoint's own timeout on top."""
        return base_ms + int(1000 * (self.timeout_seconds or 0))


class AttemptOutcome(StrEnum):
    """What an attempt says about the receiver (record.lua's outcome argument)."""

    OK = "ok"  # it took it (2xx)
    FAIL = "fail"  # it did not, yet: tried again while tries are left
    GONE = "gone"  # 410 Gone: it asks us to stop, which disables the endpoint


class LeaseSkip(StrEnum):
    """Why common.lua lease_one did not lease a delivery."""

    GONE = "gone"  # no such delivery: its due entry is dropped
    DONE = "done"  # finished already
    LEASED = "leased"  # another lease holds it
    EARLY = "early"  # a stale wake-up for a retry not due yet: its due entry wakes it
    FAILED = "failed"  # its endpoint or its payload is gone: failed unsent
    DISABLED = "disabled"  # its endpoint is disabled: so is it now
    BUSY = "busy"  # its endpoint holds max_in_flight leases: parked for a slot
    APP_BUSY = "app_busy"  # its application holds app_max_in_flight: parked for a slot
    THROTTLED = "throttled"  # its endpoint's rate limit: due again once it allows
    QUEUED = "queued"  # behind the head of its FIFO endpoint's line: due once that ends


class RecordOutcome(StrEnum):
    """record.lua's answer: the delivery's status after the attempt (states.Status), or
    STALE, when the lease was no longer ours and nothing was recorded."""

    PENDING = "pending"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    DISABLED = "disabled"
    STALE = "stale"


class RetryOutcome(StrEnum):
    """retry.lua's answer for one delivery."""

    OK = "ok"  # pending again, due now
    PENDING = "pending"  # on its way already: left alone
    MISSING = "missing"  # Redis holds no such delivery


@dataclass(frozen=True)
class HealthPolicy:
    disable_after_ms: int  # failing this long with exhausted deliveries disables an endpoint
    ops_budget: int  # attempts an operational event's deliveries get


@dataclass(frozen=True)
class LeaseArgs:
    """lease.lua's arguments, in the order its head names them."""

    # May hold one '+<task id>' (common.lua push_wakeups): the ids that joined that wake-up.
    delivery_ids: Sequence[str]
    token: str
    now_ms: int
    lease_ms: int
    max_in_flight: int  # the most leases held per endpoint
    app_max_in_flight: int = 0  # the most held per application (of its events); 0: no cap

    def keys(self) -> list[str]:
        """The due set of the ids' one bucket (DeliveryStore.lease makes a call a bucket)."""
        return [keys.due(_one_bucket(self.delivery_ids))]

    def argv(self) -> list[str | int | float]:
        return [
            self.now_ms, self.token, self.lease_ms, self.max_in_flight, self.app_max_in_flight,
            *self.delivery_ids,
        ]  # fmt: skip


@dataclass(frozen=True)
class LeaseResult:
    jobs: list[Job]
    skipped: dict[str, LeaseSkip]  # delivery id -> why it was not leased

    @classmethod
    def parse(cls, rows: Sequence[list[str]]) -> LeaseResult:
        """lease.lua's answer, one common.lua lease_one row per delivery: {id, 'go', ...the
        job} or {id, why}."""
        jobs: list[Job] = []
        skipped: dict[str, LeaseSkip] = {}
        for row in rows:
            if row[1] == "go":
                job = Job(row[0], int(row[2]) + 1, row[3], row[4], row[5], row[6], row[7], row[8])
                jobs.append(
                    replace(
                        job,
                        retry_schedule=decode_schedule(row[9]),
                        timeout_seconds=decode_timeout(row[10]),
                        ordered=row[11] == "1",
                        traceparent=row[12] or None,
                        send_traceparent=row[13] == "1",
                    )
                )
            else:
                skipped[row[0]] = LeaseSkip(row[1])
        return cls(jobs, skipped)


@dataclass(frozen=True)
class NextLease:
    """Asks ``record`` to lease, for the caller, the deliveries parked for the slots the
    attempt frees (its endpoint's and its application's): the same token and limits a
    ``lease`` call would take (the application's is the store's)."""

    token: str
    lease_ms: int
    max_in_flight: int


@dataclass(frozen=True)
class RecordArgs:
    """record.lua's arguments, in the order its head names them."""

    delivery_id: str
    token: str
    now_ms: int
    attempt: Attempt
    outcome: AttemptOutcome
    delay_ms: int | None  # None: no more tries
    health: HealthPolicy
    next_lease: NextLease | None = None
    app_max_in_flight: int = 0  # next_lease's cap per application (LeaseArgs'); 0: no cap
    budget: int = 0  # the endpoint's own attempt budget (its schedule's length); 0: none

    def keys(self) -> list[str]:
        return [keys.delivery(self.delivery_id)]

    def argv(self) -> list[str | int | float]:
        a, lease = self.attempt, self.next_lease
        # Operational events this attempt may cause need ids and a timestamp; Lua makes
        # neither. They belong to no application and are kept in the default one's bucket,
        # with the operations endpoints: mark 0.
        ops_ids = [new_id("msg", self.now_ms, mark=0) for _ in range(3)]
        return [
            self.now_ms, self.token, self.delivery_id, a.to_json(), self.outcome,
            -1 if self.delay_ms is None else self.delay_ms,
            "" if a.status_code is None else a.status_code, a.error or "",
            self.health.disable_after_ms, iso(self.now_ms), self.health.ops_budget, *ops_ids,
            # No token: the parked deliveries are left to the scheduler.
            *((lease.token, lease.lease_ms, lease.max_in_flight) if lease else ("", 0, 0)),
            self.app_max_in_flight,
            a.status_class,
            self.budget,
        ]  # fmt: skip


@dataclass(frozen=True)
class Recorded:
    status: RecordOutcome
    attempts: int  # 0 when STALE
    # The parked deliveries record leased (NextLease), or why it could not: send them next.
    next: LeaseResult | None = None
    created_ms: int = 0  # when the delivery was made (0 when STALE): its latency's start

    @classmethod
    def parse(cls, reply: list[Any]) -> Recorded:
        """record.lua's reply: {'stale'} or {status, attempts, created_ms[, a lease row for
        each parked one]}."""
        status = RecordOutcome(reply[0])
        if status is RecordOutcome.STALE:
            return cls(status, 0)
        following = LeaseResult.parse(reply[3:]) if len(reply) > 3 else None
        return cls(status, int(reply[1]), following, int(reply[2]))


@dataclass(frozen=True)
class RetryArgs:
    """retry.lua's arguments, in the order its head names them."""

    delivery_ids: Sequence[str]
    now_ms: int  # the retried deliveries' next_at
    grace_ms: int  # their due entry comes this much later: the API wakes them at once

    def keys(self) -> list[str]:
        return [keys.due(_one_bucket(self.delivery_ids))]

    def argv(self) -> list[str | int | float]:
        return [self.now_ms, self.grace_ms, *self.delivery_ids]


@dataclass(frozen=True)
class Retried:
    outcomes: list[RetryOutcome]  # one per id, in the order given

    @classmethod
    def parse(cls, reply: list[str]) -> Retried:
        """retry.lua's reply: one outcome per id."""
        return cls([RetryOutcome(r) for r in reply])


# The class of an attempt's answer (Attempt.status_class): a delivery's last one is its
# `class`, and the metrics count attempts by it.
STATUS_CLASSES = ("2xx", "3xx", "4xx", "5xx", "timeout", "network")


@dataclass(frozen=True)
class Attempt:
    number: int
    started_ms: int
    duration_ms: int
    status_code: int | None
    error: str | None
    response_body: str
    # What went out (endpoint header values redacted) and what came back, cut to bounds.
    request_headers: dict[str, str] = field(default_factory=dict)
    response_headers: dict[str, str] = field(default_factory=dict)

    @property
    def status_class(self) -> str:
        """'2xx'..'5xx' for an HTTP answer, else 'timeout' or 'network' (STATUS_CLASSES)."""
        if self.status_code is not None:
            return f"{str(self.status_code)[0]}xx"
        return "timeout" if self.error == "timeout" else "network"

    def to_json(self) -> str:
        """Compact: nothing that is empty (from_json puts it back). The record script passes
        it on to the log outbox as it is."""
        raw: dict[str, object] = {"n": self.number, "t": self.started_ms, "d": self.duration_ms}
        if self.status_code is not None:
            raw["c"] = self.status_code
        if self.error is not None:
            raw["e"] = self.error
        if self.response_body:
            raw["b"] = self.response_body
        if self.request_headers:
            raw["rq"] = self.request_headers
        if self.response_headers:
            raw["rs"] = self.response_headers
        return orjson.dumps(raw).decode()

    @classmethod
    def from_json(cls, text: str | bytes) -> Attempt:
        raw = orjson.loads(text)
        return cls(
            raw["n"], raw["t"], raw["d"], raw.get("c"), raw.get("e"), raw.get("b", ""),
            raw.get("rq") or {}, raw.get("rs") or {},
        )  # fmt: skip


@dataclass(frozen=True)
class DeliveryRecord:
    id: str
    event_id: str
    endpoint_id: str
    event_type: str
    status: Status
    attempts: int
    next_at_ms: int | None
    created_ms: int
    updated_ms: int
    last_code: int | None
    last_error: str | None
    # The class of the last attempt ('2xx'…'5xx', 'timeout', 'network'); None before one.
    last_class: str | None = None
    # Its event's application (None: an operational event). The hash does not keep it: a
    # record read from Redis alone has None, which the history reader fills in.
    application: str | None = None

    # The hash fields a record is made of (the hash holds the attempts too: get_many skips
    # them, a page has no use for response bodies).
    FIELDS = (
        "event", "endpoint", "type", "status", "attempts", "next_at", "created", "updated",
        "code", "error", "class", "sched",
    )  # fmt: skip

    @classmethod
    def from_hash(
        cls,
        delivery_id: str,
        raw: dict[str, str],
        event_type: str | None = None,
        endpoint_id: str | None = None,
    ) -> DeliveryRecord:
        """The record from its hash, which leaves out what its id says (keys.py, "Derived
        fields"): event_type is then the type of the event the id names, endpoint_id the
        endpoint its tail names (DeliveryStore._read looks both up)."""
        status = cast(Status, raw["status"])  # the scripts write no other value
        attempts = int(raw["attempts"])
        return cls(
            id=delivery_id,
            event_id=raw.get("event") or delivery_event(delivery_id),
            endpoint_id=raw.get("endpoint") or endpoint_id or "",
            event_type=raw.get("type") or event_type or "",
            status=shown_status(status, attempts, raw.get("next_at"), raw.get("sched")),
            attempts=attempts,
            next_at_ms=int(raw["next_at"]) if status == "pending" else None,
            created_ms=int(raw["created"]) if raw.get("created") else id_time_ms(delivery_id),
            updated_ms=int(raw["updated"]),
            last_code=int(raw["code"]) if raw.get("code") else None,
            last_error=raw.get("error") or None,
            last_class=raw.get("class") or None,
        )


class DeliveryStore:
    def __init__(self, redis: Redis, scripts: Scripts, *, app_concurrency: int = 0) -> None:
        """``app_concurrency``: the most leases every lease and record through this store
        lets one application's events hold across all workers (WEBHOOK_APP_CONCURRENCY;
        0: no cap). The store's, not each call's: one deployment-wide value, which the
        engine's chained leases (NextLease) must take too."""
        self._redis = redis
        self._scripts = scripts
        self._app_concurrency = app_concurrency
        self._records = ScriptBatch(scripts, "record")

    async def lease(
        self, ids: Sequence[str], token: str, now_ms: int, lease_ms: int, max_in_flight: int
    ) -> LeaseResult:
        """Lease what may be sent now; ``max_in_flight`` caps the leases held per endpoint
        (and the store's ``app_concurrency`` those per application). Ids of several buckets
        (a wake-up the scheduler filled from many) are leased a bucket a call, at once."""
        calls = [
            LeaseArgs(group, token, now_ms, lease_ms, max_in_flight, self._app_concurrency)
            for group in _by_bucket(ids).values()
        ]
        rows = await asyncio.gather(
            *(self._scripts.run("lease", args.keys(), args.argv()) for args in calls)
        )
        return LeaseResult.parse([row for reply in rows for row in reply])

    async def record(
        self,
        *,
        delivery_id: str,
        token: str,
        now_ms: int,
        attempt: Attempt,
        outcome: AttemptOutcome,
        delay_ms: int | None,
        health: HealthPolicy,
        next_lease: NextLease | None = None,
        budget: int = 0,
    ) -> Recorded:
        """The delivery's new status (or STALE: the lease was lost) and what comes next.
        ``budget``: the endpoint's own attempt budget, in place of the delivery's (0)."""
        args = RecordArgs(
            delivery_id, token, now_ms, attempt, outcome, delay_ms, health, next_lease,
            self._app_concurrency, budget,
        )  # fmt: skip
        return Recorded.parse(await self._records.run(args.keys(), args.argv()))

    async def add_counts(self, batch: AttemptCounts) -> None:
        """Add counted attempts to the metrics and the endpoints' windows (store/counts.py):
        one MULTI/EXEC a bucket (the keys of one are of one slot), all sent at once, so
        that a part tried again after a failure was not half added before (only a reply
        lost after EXEC, a timeout, can count one twice). What was added leaves ``batch``:
        on a failure it holds the buckets still to add, which the caller puts back."""
        parts = batch.by_bucket()
        outcomes = await asyncio.gather(
            *(self._add_part(part) for part in parts.values()), return_exceptions=True
        )
        failed: BaseException | None = None
        for part, outcome in zip(parts.values(), outcomes, strict=True):
            if isinstance(outcome, BaseException):
                failed = failed or outcome
            else:
                batch.forget(part)
        if failed is not None:
            raise failed

    async def _add_part(self, part: AttemptCounts) -> None:
        async with self._redis.pipeline(transaction=True) as pipe:
            for key, counts in part.added.items():
                for name, amount in counts.items():
                    pipe.hincrby(key, name, amount)
                if key in part.expiry:
                    pipe.expire(key, part.expiry[key])
            for key, fields in part.last.items():
                pipe.hset(key, items=[item for pair in fields.items() for item in pair])
            await pipe.execute()

    async def retry(self, delivery_ids: Sequence[str], now_ms: int, grace_ms: int) -> Retried:
        """One more attempt, now, for each finished delivery named (a call a bucket)."""
        if not delivery_ids:
            return Retried([])
        groups = list(_by_bucket(delivery_ids).values())
        replies = await asyncio.gather(
            *(
                self._scripts.run("retry", args.keys(), args.argv())
                for args in (RetryArgs(group, now_ms, grace_ms) for group in groups)
            )
        )
        outcome = {
            delivery_id: answer
            for group, reply in zip(groups, replies, strict=True)
            for delivery_id, answer in zip(group, reply, strict=True)
        }
        return Retried.parse([outcome[d] for d in delivery_ids])

    async def get(self, delivery_id: str) -> DeliveryRecord | None:
        return next(iter(await self._read([delivery_id], None)), None)

    async def get_many(self, ids: Sequence[str]) -> list[DeliveryRecord]:
        return await self._read(ids, DeliveryRecord.FIELDS)

    async def _read(self, ids: Sequence[str], fields: Sequence[str] | None) -> list[DeliveryRecord]:
        """The records that exist, in order; every field, or these. In the same round trip,
        what the hashes may leave out (keys.py, "Derived fields"): the type of each event
        the ids start with, and the endpoint each sequence number at their end stands for."""
        events = list(dict.fromkeys(delivery_event(d) for d in ids))
        # The sequence number tails, by bucket: each bucket numbers its own endpoints.
        tails: dict[int, list[str]] = {}
        for delivery_id in ids:
            tail = delivery_tail(delivery_id)
            if tail_endpoint(tail) is None:
                seen = tails.setdefault(keys.bucket_of(delivery_id), [])
                if tail not in seen:
                    seen.append(tail)
        async with self._redis.pipeline(transaction=False) as pipe:
            for delivery_id in ids:
                if fields is None:
                    pipe.hgetall(keys.delivery(delivery_id))
                else:
                    pipe.hmget(keys.delivery(delivery_id), fields)
            for event_id in events:
                pipe.hget(keys.event(event_id), "type")
            for bucket, named in tails.items():
                pipe.hmget(keys.endpoint_seqs(bucket), named)
            replies: list[Any] = await pipe.execute()
        types = dict(zip(events, replies[len(ids) : len(ids) + len(events)], strict=True))
        endpoints = {
            (bucket, tail): endpoint_id
            for (bucket, named), found in zip(
                tails.items(), replies[len(ids) + len(events) :], strict=True
            )
            for tail, endpoint_id in zip(named, found, strict=True)
        }
        records = []
        for delivery_id, row in zip(ids, replies[: len(ids)], strict=True):
            raw: dict[str, str] = (
                row
                if fields is None
                else {n: v for n, v in zip(fields, row, strict=True) if v is not None}
            )
            if raw:
                tail = delivery_tail(delivery_id)
                records.append(
                    DeliveryRecord.from_hash(
                        delivery_id,
                        raw,
                        types[delivery_event(delivery_id)],
                        tail_endpoint(tail) or endpoints.get((keys.bucket_of(delivery_id), tail)),
                    )
                )
        return records
