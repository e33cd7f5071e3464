"""The share rule and the lease bookkeeping of store/bucket_leases.py, on an in-memory store.

The store below does the few commands the leases use (and redis-py's two lock scripts, by
their SHA) with a clock the test moves, so that expiry is exact; the real server is the
integration test's (tests/integration/test_scheduler_buckets.py).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from typing import Any, cast

import pytest
import redis
from redis.commands.core import Script
from redis.lock import Lock

from webhook_service.store import keys
from webhook_service.store.bucket_leases import (
    BucketLeases,
    Plan,
    fair_share,
    lease_holders,
    oldest_pass,
    plan,
)

B = keys.BUCKETS
LEASE_S = 5.0


def _sha(script: str) -> str:
    return hashlib.sha1(script.encode()).hexdigest()  # noqa: S324 - Redis names scripts so


class Store:
    """Strings with a PX expiry and sorted sets, on a clock of the test's."""

    def __init__(self) -> None:
        self.now = 1000.0  # seconds
        self.strings: dict[str, tuple[str, float]] = {}  # value, when it expires
        self.zsets: dict[str, dict[str, float]] = {}
        self.refuse_sets = False  # as at maxmemory: SET and ZADD refused, the rest runs

    # What redis-py's Script needs of its client: an encoder, to name the script by SHA.
    def get_encoder(self) -> Store:
        return self

    def encode(self, value: str) -> bytes:
        return value.encode()

    def register_script(self, script: str) -> Script:
        return Script(cast(redis.Redis, self), script)

    def pipeline(self, transaction: bool = False) -> Pipe:
        return Pipe(self)

    def get(self, key: str) -> str | None:
        found = self.strings.get(key)
        if found is None or found[1] <= self.now:
            self.strings.pop(key, None)
            return None
        return found[0]

    def set(self, key: str, value: str, nx: bool = False, px: int = 0) -> bool | None:
        if self.refuse_sets:
            raise redis.exceptions.ResponseError("OOM command not allowed")
        if nx and self.get(key) is not None:
            return None
        self.strings[key] = (value, self.now + px / 1000)
        return True

    def zadd(self, key: str, mapping: dict[str, float]) -> int:
        if self.refuse_sets:
            raise redis.exceptions.ResponseError("OOM command not allowed")
        self.zsets.setdefault(key, {}).update(mapping)
        return len(mapping)

    def zremrangebyscore(self, key: str, low: str, high: float) -> int:
        members = self.zsets.get(key, {})
        gone = [m for m, score in members.items() if score <= high]
        for member in gone:
            del members[member]
        return len(gone)

    def zcard(self, key: str) -> int:
        return len(self.zsets.get(key, {}))

    def zrem(self, key: str, member: str) -> int:
        return 1 if self.zsets.get(key, {}).pop(member, None) is not None else 0

    def evalsha(self, sha: str, numkeys: int, key: str, token: str, *args: Any) -> int:
        if self.get(key) != token:
            return 0
        if sha == _sha(Lock.LUA_REACQUIRE_SCRIPT):
            self.strings[key] = (token, self.now + int(args[0]) / 1000)
        elif sha == _sha(Lock.LUA_RELEASE_SCRIPT):
            del self.strings[key]
        else:
            raise AssertionError(f"no script {sha}")
        return 1


class Pipe:
    def __init__(self, store: Store) -> None:
        self._store = store
        self._calls: list[Callable[[], Any]] = []

    def __enter__(self) -> Pipe:
        return self

    def __exit__(self, *_: object) -> None:
        pass

    def __getattr__(self, name: str) -> Callable[..., None]:
        def queue(*args: Any, **kwargs: Any) -> None:
            self._calls.append(lambda: getattr(self._store, name)(*args, **kwargs))

        return queue

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        out: list[Any] = []
        for call in self._calls:
            try:
                out.append(call())
            except redis.exceptions.ResponseError as exc:
                if raise_on_error:
                    raise
                out.append(exc)
        return out


def _leases(store: Store, name: str, seed: int = 0) -> BucketLeases:
    return BucketLeases(
        cast(redis.Redis, store),
        LEASE_S,
        scheduler_id=name,
        rng=random.Random(seed),
        clock=lambda: store.now,
        wall_ms=lambda: int(store.now * 1000),
    )


def test_the_share_is_the_buckets_over_the_live_schedulers_rounded_up() -> None:
    assert [fair_share(64, n) for n in (1, 2, 3, 4, 5, 64, 100)] == [64, 32, 22, 16, 13, 1, 1]
    assert fair_share(64, 0) == 64  # none counted yet: itself
    # The shares cover every bucket, whatever the count.
    assert all(fair_share(64, n) * n >= 64 for n in range(1, 200))


def test_a_plan_keeps_up_to_its_share_and_takes_free_ones_in_its_order() -> None:
    order = list(reversed(range(8)))
    free: list[str | None] = [None] * 8
    assert plan("a", free, 2, order) == Plan(keep=(), let_go=(), take=(7, 6, 5, 4))
    # Holding more than its share: the lowest kept, the rest let go, none taken.
    mine: list[str | None] = ["a"] * 6 + [None] * 2
    assert plan("a", mine, 2, order) == Plan(keep=(0, 1, 2, 3), let_go=(4, 5), take=())
    # Short of it: only free buckets are tried, never another's.
    mixed: list[str | None] = ["a", "b", "b", None, "c", None, "b", "b"]
    chosen = plan("a", mixed, 3, order)
    assert chosen == Plan(keep=(0,), let_go=(), take=(5, 3))
    assert chosen.after == {0, 3, 5}


def _converge(names: list[str], holders: list[str | None], rounds: int) -> None:
    """Passes in turn, each take succeeding only on a bucket still free (as SET NX)."""
    orders = {n: random.Random(n).sample(range(B), B) for n in names}
    for _ in range(rounds):
        for name in names:
            chosen = plan(name, holders, len(names), orders[name])
            for b in chosen.let_go:
                holders[b] = None
            for b in chosen.take:
                if holders[b] is None:
                    holders[b] = name


def test_three_schedulers_converge_on_a_third_each_and_two_cover_a_dead_ones() -> None:
    holders: list[str | None] = ["a"] * B  # one ran alone until the others came
    _converge(["a", "b", "c"], holders, rounds=3)
    assert None not in holders
    counts = sorted(holders.count(n) for n in "abc")
    assert counts[-1] <= fair_share(B, 3) and counts[0] >= B - 2 * fair_share(B, 3)
    # c dies: its leases expire, the other two count two live and take its buckets.
    holders = [None if h == "c" else h for h in holders]
    _converge(["a", "b"], holders, rounds=2)
    assert None not in holders and max(holders.count(n) for n in "ab") <= fair_share(B, 2)


def test_a_lease_is_taken_renewed_and_counted_held_until_it_would_expire() -> None:
    store = Store()
    a = _leases(store, "a")
    assert a.renew() == frozenset(keys.all_buckets())  # alone: every bucket
    assert lease_holders(cast(redis.Redis, store)) == dict.fromkeys(keys.all_buckets(), "a")
    store.now += LEASE_S - 0.1
    assert a.renew() == frozenset(keys.all_buckets())  # renewed: a lease from now
    store.now += LEASE_S - 0.1
    assert len(a.held()) == B
    # No pass for a whole lease (the process stalled, or Redis is away): it stops counting
    # them at the moment the server lets them go, not later.
    store.now += 0.1
    assert a.held() == frozenset()
    assert store.get(keys.bucket_lease(0)) is None


def test_a_newcomer_gets_its_share_and_a_dead_ones_buckets_are_taken_over() -> None:
    store = Store()
    a, b, c = (_leases(store, name, seed) for seed, name in enumerate("abc"))
    a.renew()
    for _ in range(3):
        for leases in (b, c, a):
            leases.renew()
    held = [a.held(), b.held(), c.held()]
    assert frozenset().union(*held) == frozenset(keys.all_buckets())
    assert sum(len(h) for h in held) == B  # none held twice
    assert max(len(h) for h in held) <= fair_share(B, 3)
    assert lease_holders(cast(redis.Redis, store)) == {
        bucket: leases.id for leases in (a, b, c) for bucket in leases.held()
    }
    # c dies (no give_up): within a lease its heartbeat and leases are gone, and the next
    # passes of a and b hold every bucket between them.
    before = c.held()
    for _ in range(int(LEASE_S / 0.5) + 1):
        store.now += 0.5
        a.renew()
        b.renew()
    assert a.held() | b.held() == frozenset(keys.all_buckets())
    assert not a.held() & b.held() and before <= a.held() | b.held()
    assert store.zcard(keys.SCHEDULERS) == 2


def test_a_renewal_checks_the_token() -> None:
    store = Store()
    a, b = _leases(store, "a"), _leases(store, "b")
    a.renew()
    store.now += LEASE_S + 0.1  # a stalled: its leases (and heartbeat) expired
    assert a.held() == frozenset()
    b.renew()  # b, alone now, takes every bucket
    assert len(b.held()) == B
    # a wakes: live counts two, and it renews none of b's leases as its own.
    assert a.renew() == frozenset()
    assert lease_holders(cast(redis.Redis, store)) == dict.fromkeys(keys.all_buckets(), "b")


def test_give_up_frees_the_buckets_at_once() -> None:
    store = Store()
    a, b = _leases(store, "a"), _leases(store, "b")
    a.renew()
    b.renew()
    a.give_up()
    assert a.held() == frozenset() and store.zcard(keys.SCHEDULERS) == 1
    assert b.renew() == frozenset(keys.all_buckets())  # no wait for a lease to expire


def test_at_maxmemory_the_leases_held_are_still_renewed() -> None:
    store = Store()
    a = _leases(store, "a")
    a.renew()
    store.refuse_sets = True  # SET and ZADD refused; the renewal script's PEXPIRE is not
    for _ in range(3):
        store.now += LEASE_S - 0.5
        assert len(a.renew()) == B


@pytest.mark.parametrize("decoded", [True, False])
def test_the_oldest_pass_is_of_the_bucket_passed_longest_ago(decoded: bool) -> None:
    def stored(passes: dict[int, int]) -> dict[Any, Any]:
        if decoded:
            return {str(b): str(ms) for b, ms in passes.items()}
        return {str(b).encode(): str(ms).encode() for b, ms in passes.items()}

    every = {b: 5000 + b for b in keys.all_buckets()}
    assert oldest_pass(stored(every)) == 5000
    assert oldest_pass(stored({b: ms for b, ms in every.items() if b != 7})) is None
    assert oldest_pass({}) is None
