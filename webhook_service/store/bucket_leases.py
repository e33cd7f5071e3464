"""The schedulers share the buckets: each bucket leased to one at a time, fairly among the live.

A scheduler process does the work of a bucket (its due claims: workers/scheduler.py; its log
outbox, its release set and its operational-event requests: history/shipper.py) only while
it holds the bucket's lease: a key of its own (``keys.bucket_lease``, no hash tag: each is
touched alone) holding the holder's id as its token. It is taken with SET NX PX, renewed
on each pass by a script that checks the token first (redis-py's own lock scripts: GET,
then PEXPIRE or DEL), and deleted on a clean stop; a dead scheduler's leases expire, and
the others take its buckets on their next pass.

The share: a live scheduler holds at most ``fair_share(BUCKETS, live)``, ceil(BUCKETS / live).
A scheduler is live while its heartbeat (``keys.SCHEDULERS``, a sorted set: its id scored by
the ms of its last pass, by its own clock, so the hosts' clocks must agree within a lease)
is younger than a lease. Each pass beats before it renews, so a dead scheduler stops being
counted no later than its leases expire, and the survivors' shares have grown by then to
cover its buckets. One holding more than its share (another scheduler joined) lets the rest
go; one holding fewer takes free buckets, in an order of its own (random), so that
schedulers starting together mostly try different ones. The shares add up to at least
BUCKETS, so every bucket has a holder once the live count is right.

Two holders of one bucket at once (one stalled past its lease) do no harm: a claim is an
atomic step that moves what it claims ahead (store/due.py), the log writer writes a batch
twice to no effect (history/writer.py), a release or an operational event is made once. The
leases share the work out; they are not what keeps it correct. A lease counts here as held
until its expiry measured from just before the command that took or renewed it was sent,
so this process stops acting on a bucket no later than the server frees it.

A pass is two round trips whatever the number of buckets: the heartbeat and every lease's
holder (GET), then the renewals, the releases and the takes. On a Redis Cluster, whose
pipelines run no script, the second is a call each. At ``maxmemory`` the renewals and
releases still run (PEXPIRE and DEL are not refused there), but a take (SET) and the
heartbeat (ZADD) are: the buckets held stay held, and a dead scheduler's wait for a
holder until the store has room again.
"""

from __future__ import annotations

import logging
import math
import os
import random
import secrets
import socket
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import redis
from redis.cluster import RedisCluster
from redis.commands.core import Script
from redis.lock import Lock

from webhook_service.store import keys
from webhook_service.store.endpoint_rewrite import text
from webhook_service.store.refusals import refused

log = logging.getLogger(__name__)


def fair_share(buckets: int, live: int) -> int:
    """The most buckets one of ``live`` schedulers may hold: ceil(buckets / live)."""
    return math.ceil(buckets / max(1, live))


@dataclass(frozen=True)
class Plan:
    """What one pass does with the leases, from who holds each (``plan``)."""

    keep: tuple[int, ...]  # held, within the share: renewed
    let_go: tuple[int, ...]  # held beyond the share: released for the others
    take: tuple[int, ...]  # free: tried (SET NX), up to the share

    @property
    def after(self) -> frozenset[int]:
        """What this scheduler holds once every take succeeds."""
        return frozenset(self.keep + self.take)


def plan(token: str, holders: Sequence[str | None], live: int, order: Sequence[int]) -> Plan:
    """The pass of the scheduler ``token`` among ``live`` ones, given each bucket's holder
    (None: free). It keeps what it holds up to its share (the lowest-numbered: a scheduler
    giving some up keeps the same ones pass after pass), lets the rest go, and tries free
    buckets, in ``order`` (a permutation of the buckets, its own), up to its share."""
    share = fair_share(len(holders), live)
    mine = [b for b, holder in enumerate(holders) if holder == token]
    keep, let_go = mine[:share], mine[share:]
    free = [b for b in order if holders[b] is None]
    return Plan(tuple(keep), tuple(let_go), tuple(free[: max(0, share - len(keep))]))


def new_scheduler_id() -> str:
    """``<pid>@<host>/<random>``: readable in the lease keys, unique across restarts."""
    return f"{os.getpid()}@{socket.gethostname()}/{secrets.token_hex(4)}"


# A call on one key, made on a client or on a pipeline (``_send``).
_Call = Callable[[Any], Any]


def _send(client: redis.Redis, calls: Sequence[_Call]) -> list[Any]:
    """Every call in one round trip (a pipeline, no transaction: each is of one key), each
    answer or the error it met (the caller judges them one by one). A cluster's pipeline
    runs no script: there, a call each, each to its node."""
    if isinstance(client, RedisCluster):
        out: list[Any] = []
        for call in calls:
            try:
                out.append(call(client))
            except redis.exceptions.ResponseError as exc:
                out.append(exc)
        return out
    with client.pipeline(transaction=False) as pipe:
        for call in calls:
            call(pipe)
        return list(pipe.execute(raise_on_error=False))


class BucketLeases:
    """One scheduler's leases. ``renew`` (one pass, from one thread) moves them; ``held``
    (from any thread) reads what this process may work on now."""

    def __init__(
        self,
        client: redis.Redis,
        lease_seconds: float,
        *,
        scheduler_id: str | None = None,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
    ) -> None:
        self._client = client
        self.id = scheduler_id or new_scheduler_id()
        self.lease_ms = int(lease_seconds * 1000)
        self._clock = clock
        self._wall_ms = wall_ms
        order = list(keys.all_buckets())
        (rng or random.Random()).shuffle(order)  # noqa: S311 - an order to try, no secret
        self._order = tuple(order)
        # Bucket -> when (self._clock) its lease ends unless renewed. Replaced whole, never
        # changed in place, so that another thread reads one pass's state or the next.
        self._until: Mapping[int, float] = {}
        self._reacquire: Script = client.register_script(Lock.LUA_REACQUIRE_SCRIPT)
        self._release: Script = client.register_script(Lock.LUA_RELEASE_SCRIPT)
        self._lock = threading.Lock()  # renew and give_up are not run at once

    def held(self) -> frozenset[int]:
        """The buckets whose lease this process holds and has not outlived."""
        now = self._clock()
        return frozenset(b for b, until in self._until.items() if until > now)

    def renew(self) -> frozenset[int]:
        """One pass: beat, read every lease's holder, renew what is ours within the share,
        let go of the rest, take free ones up to the share. What is held after it."""
        with self._lock:
            self._until = self._pass()
        return self.held()

    def _pass(self) -> dict[int, float]:
        wall = self._wall_ms()
        names = [keys.bucket_lease(b) for b in keys.all_buckets()]
        read: list[_Call] = [
            lambda c: c.zadd(keys.SCHEDULERS, {self.id: wall}),
            lambda c: c.zremrangebyscore(keys.SCHEDULERS, "-inf", wall - self.lease_ms),
            lambda c: c.zcard(keys.SCHEDULERS),
            *(lambda c, name=name: c.get(name) for name in names),
        ]
        beat, _, live, *found = _send(self._client, read)
        if isinstance(beat, Exception) and not refused(beat, "writing a scheduler heartbeat"):
            raise beat
        # Refused (at maxmemory a ZADD is, while the renewals' PEXPIRE still runs): the
        # others count this one out until its heartbeat is written again; the work goes on.
        for answer in (live, *found):
            if isinstance(answer, Exception):
                raise answer
        holders = [text(v) if v is not None else None for v in found]
        chosen = plan(self.id, holders, int(live), self._order)
        sent = self._clock()
        held = chosen.keep + chosen.take
        calls: list[_Call] = [
            *(self._renewing(names[b]) for b in chosen.keep),
            *(self._taking(names[b]) for b in chosen.take),
            *(self._letting_go(names[b]) for b in chosen.let_go),
        ]
        answers = _send(self._client, calls)[: len(held)]
        until = sent + self.lease_ms / 1000
        # A renewal answers 1 (0: the token was not ours any more), a take True (None: the
        # bucket was taken meanwhile); a refusal, its error.
        return {b: until for b, answer in zip(held, answers, strict=True) if answer == 1}

    def _renewing(self, name: str) -> _Call:
        return lambda c: self._reacquire(keys=[name], args=[self.id, self.lease_ms], client=c)

    def _letting_go(self, name: str) -> _Call:
        return lambda c: self._release(keys=[name], args=[self.id], client=c)

    def _taking(self, name: str) -> _Call:
        return lambda c: c.set(name, self.id, nx=True, px=self.lease_ms)

    def give_up(self) -> None:
        """On a clean stop: every lease released and the heartbeat gone, so that the others
        take the buckets on their next pass instead of after a lease."""
        with self._lock:
            held, self._until = tuple(self._until), {}
            calls = [self._letting_go(keys.bucket_lease(b)) for b in held]
            calls.append(lambda c: c.zrem(keys.SCHEDULERS, self.id))
            try:
                _send(self._client, calls)
            except redis.exceptions.RedisError:
                log.info("scheduler leases not released; they expire by themselves")


def lease_holders(client: redis.Redis) -> dict[int, str]:
    """Each leased bucket's holder (operators' views and tests)."""
    names = [keys.bucket_lease(b) for b in keys.all_buckets()]
    with client.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.get(name)
        found = pipe.execute()
    return {b: text(v) for b, v in enumerate(found) if v is not None}


def record_passes(client: redis.Redis, buckets: Collection[int], now_ms: int) -> None:
    """The scheduler passed over ``buckets`` at ``now_ms`` (one HSET, each pass): /readyz
    and the scheduler-lag metric read the oldest (``oldest_pass``)."""
    if buckets:
        client.hset(keys.SCHEDULER_PASSES, mapping={str(b): now_ms for b in sorted(buckets)})


def oldest_pass(passes: Mapping[Any, Any]) -> int | None:
    """When the bucket passed over longest ago was last passed (``keys.SCHEDULER_PASSES``
    read whole); None while some bucket has never been: each must be, for the scheduling
    to be live."""
    seen = {text(b): int(text(ms)) for b, ms in passes.items()}
    times = [seen.get(str(b)) for b in keys.all_buckets()]
    return None if any(t is None for t in times) else min(t for t in times if t is not None)
