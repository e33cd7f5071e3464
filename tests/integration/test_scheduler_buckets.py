"""Three schedulers share the buckets on a real Valkey (store/bucket_leases.py).

Scheduler objects in this process: every bucket held by exactly one, each about a third,
and deliveries due in every bucket all claimed once, each by its bucket's holder; a
scheduler's shipper ships its buckets' outboxes alone. Scheduler processes: kill -9 one and
the other two hold its buckets within the lease; stop one cleanly and its buckets pass over
at once.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import cast

import pytest
import redis
import sqlalchemy as sa
from redis.asyncio import Redis
from redis.cluster import RedisCluster

from tests.integration.conftest import save_endpoint
from tests.support import cluster
from tests.support.stack import Stack, settings_of, start_stack
from webhook_service.config import Settings
from webhook_service.embedded import EmbeddedValkey
from webhook_service.history.shipper import Shipper
from webhook_service.ids import new_id
from webhook_service.store import keys
from webhook_service.store.bucket_leases import (
    BucketLeases,
    fair_share,
    lease_holders,
    oldest_pass,
)
from webhook_service.store.connect import primaries
from webhook_service.store.events import EventStore
from webhook_service.store.scripts import Scripts, drop_other_releases, library
from webhook_service.timeutil import now_ms
from workers.scheduler import Scheduler, lock_seconds

B = keys.BUCKETS
THIRD = fair_share(B, 3)


def _poll(condition: Callable[[], bool], timeout: float, what: str) -> float:
    """Seconds until ``condition`` held; fails after ``timeout``."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"{what}: not within {timeout:g} s")
        time.sleep(0.05)
    return time.monotonic() - start


@pytest.fixture
def store(valkey: EmbeddedValkey) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(valkey.url, decode_responses=True)
    client.flushall()
    yield client
    client.close()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return settings_of({"WEBHOOK_DATA_DIR": str(tmp_path), "WEBHOOK_SCHEDULER_INTERVAL": "0.1"})


class Wakes:
    """A scheduler's publisher: what it woke, with the buckets it held as it did."""

    def __init__(self) -> None:
        self.scheduler: Scheduler | None = None
        self.woken: list[tuple[str, frozenset[int]]] = []

    def wake_sync(self, delivery_ids: Sequence[str], *, retry: bool) -> None:
        assert self.scheduler is not None
        held = self.scheduler.leases.held()
        self.woken += [(d, held) for d in delivery_ids]


def _schedulers(url: str, settings: Settings) -> list[tuple[Scheduler, Wakes]]:
    out = []
    for _ in range(3):
        wakes = Wakes()
        wakes.scheduler = Scheduler(
            redis.Redis.from_url(url, decode_responses=True), wakes, settings
        )
        out.append((wakes.scheduler, wakes))
    return out


def _assert_shared(store: redis.Redis, ids: Sequence[str]) -> None:
    holders = lease_holders(store)
    assert set(holders) == set(keys.all_buckets()), "a bucket without a holder"
    counts = Counter(holders.values())
    assert set(counts) == set(ids), counts
    assert max(counts.values()) <= THIRD and min(counts.values()) >= B - 2 * THIRD, counts


def test_a_starting_scheduler_deletes_the_libraries_of_other_releases(
    valkey: EmbeddedValkey, store: redis.Redis, settings: Settings
) -> None:
    ours = library()
    theirs = ours.name.replace(ours.name.removeprefix("webhook_"), "0" * 16)
    store.function_load(ours.code.replace(ours.name.removeprefix("webhook_"), "0" * 16))
    scheduler = Scheduler(redis.Redis.from_url(valkey.url), Wakes(), settings)
    stop = threading.Event()
    running = threading.Thread(target=scheduler.run, args=(stop,))
    running.start()
    try:
        _poll(lambda: not store.function_list(library=theirs), 10, "their library deleted")
    finally:
        stop.set()
        running.join()


def test_every_bucket_is_held_by_one_and_each_holds_a_third(
    store: redis.Redis, valkey: EmbeddedValkey, settings: Settings
) -> None:
    schedulers = [s for s, _ in _schedulers(valkey.url, settings)]
    schedulers[0].tick()  # the first alone: it takes every bucket
    assert len(schedulers[0].leases.held()) == B
    for _ in range(4):
        for scheduler in schedulers:
            scheduler.tick()
    held = [s.leases.held() for s in schedulers]
    assert sum(len(h) for h in held) == B and frozenset().union(*held) == set(keys.all_buckets())
    _assert_shared(store, [s.leases.id for s in schedulers])
    # Each bucket's pass is noted by its holder: every one has been passed over.
    passed = oldest_pass(store.hgetall(keys.SCHEDULER_PASSES))
    assert passed is not None and passed > now_ms() - 10_000
    for scheduler in schedulers:
        scheduler.leases.give_up()
    assert lease_holders(store) == {} and store.zcard(keys.SCHEDULERS) == 0


def _due_everywhere(store: redis.Redis, per_bucket: int) -> dict[str, int]:
    """``per_bucket`` deliveries due now in every bucket (a third of them retries): id ->
    its bucket. claim_due.lua reads a delivery's attempts and its due entry, no more."""
    return _due_everywhere_on(store, per_bucket)


def _due_everywhere_on(store: redis.Redis | RedisCluster, per_bucket: int) -> dict[str, int]:
    made: dict[str, int] = {}
    now = now_ms()
    with store.pipeline(transaction=False) as pipe:
        for bucket in keys.all_buckets():
            for n in range(per_bucket):
                delivery_id = f"dlv_b{bucket}_{n}"
                made[delivery_id] = bucket
                pipe.hset(keys.in_bucket(bucket, "delivery", delivery_id), "attempts", n % 3)
                pipe.zadd(keys.due(bucket), {delivery_id: now - 1000})
        pipe.execute()
    return made


def test_deliveries_due_in_every_bucket_are_claimed_once_each_by_its_holder(
    store: redis.Redis, valkey: EmbeddedValkey, settings: Settings
) -> None:
    schedulers = _schedulers(valkey.url, settings)
    stop = threading.Event()
    threads = [threading.Thread(target=s.run, args=(stop,)) for s, _ in schedulers]
    for thread in threads:  # all at once: they contend for the buckets from the first pass
        thread.start()
    try:
        ids = [s.leases.id for s, _ in schedulers]

        def shared() -> bool:
            counts = Counter(lease_holders(store).values())
            return sum(counts.values()) == B and max(counts.values()) <= THIRD

        _poll(shared, 30, "the three share the buckets")
        # Due while they run, in every bucket, more than one pass claims (CLAIM_LIMIT).
        made = _due_everywhere(store, per_bucket=20)
        _poll(lambda: sum(len(w.woken) for _, w in schedulers) >= len(made), 30, "all claimed")
        time.sleep(3 * settings.scheduler_interval)  # passes enough to claim any twice
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
    woken = Counter(d for _, w in schedulers for d, _ in w.woken)
    assert set(woken) == set(made)
    assert [d for d, n in woken.items() if n > 1] == []
    for _, wakes in schedulers:
        assert all(made[d] in held for d, held in wakes.woken), "woken off its leases"
    # They shared the claiming: each woke about its third.
    mine = [len(w.woken) for _, w in schedulers]
    assert min(mine) >= 20 * (B - 2 * THIRD), (mine, ids)
    assert lease_holders(store) == {}  # run() gave them up on stop


async def test_a_schedulers_shipper_ships_the_outboxes_of_its_buckets_alone(
    client: Redis, sync_redis: redis.Redis, log_engine: sa.Engine, settings: Settings
) -> None:
    scripts = Scripts(client)
    at = now_ms()
    await save_endpoint(scripts, "lease.shipped", at)
    await EventStore(client, scripts).accept(
        event_id=new_id("msg", at), event_type="lease.shipped", body="{}", key_id="key_1",
        now_ms=at, budget=3, grace_ms=1000, idempotency=None, wakeup=None,
        backlog_max=1_000_000,
    )  # fmt: skip
    bucket = keys.DEFAULT_BUCKET  # the default application's
    assert await client.xlen(keys.outbox(bucket)) == 1
    sync_redis.set(keys.bucket_lease(bucket), "another", px=60_000)
    leases = BucketLeases(sync_redis, lock_seconds(settings))
    assert bucket not in leases.renew()
    shipper = Shipper(sync_redis, log_engine, settings, leases)
    assert shipper.ship_once() == 0  # the other's to ship
    assert await client.xlen(keys.outbox(bucket)) == 1
    sync_redis.delete(keys.bucket_lease(bucket))  # the other stopped
    assert bucket in leases.renew()
    assert shipper.ship_once() == 1
    assert await client.xlen(keys.outbox(bucket)) == 0
    leases.give_up()


def test_on_a_cluster_three_schedulers_share_the_buckets_and_claim_from_them(
    tmp_path: Path, settings: Settings
) -> None:
    """The leases' keys spread over the primaries, the renewals a script call each."""
    with cluster.running(tmp_path) as formed:
        seed = formed.seed
        clients = [
            RedisCluster(
                host="127.0.0.1", port=seed.port, password=formed.password, decode_responses=True
            )
            for _ in range(3)
        ]
        try:
            made = _due_everywhere_on(clients[0], per_bucket=2)
            schedulers = []
            for client in clients:
                wakes = Wakes()
                wakes.scheduler = Scheduler(cast(redis.Redis, client), wakes, settings)
                schedulers.append((wakes.scheduler, wakes))
            for _ in range(4):
                for scheduler, _ in schedulers:
                    scheduler.tick()
            _assert_shared(cast(redis.Redis, clients[0]), [s.leases.id for s, _ in schedulers])
            woken = Counter(d for _, w in schedulers for d, _ in w.woken)
            assert set(woken) == set(made) and max(woken.values()) == 1
            for _, wakes in schedulers:
                assert all(made[d] in held for d, held in wakes.woken), "woken off its leases"
            for scheduler, _ in schedulers:
                scheduler.leases.give_up()
            assert lease_holders(cast(redis.Redis, clients[0])) == {}
            # Another release's library, loaded on every primary, is deleted from each.
            ours = library()
            digest = ours.name.removeprefix("webhook_")
            clients[0].function_load(ours.code.replace(digest, "0" * 16))
            theirs = f"webhook_{'0' * 16}"
            assert drop_other_releases(cast(redis.Redis, clients[0])) == [theirs]
            for primary in primaries(cast(redis.Redis, clients[0])):
                assert primary.function_list(library=theirs) == []
                assert primary.function_list(library=ours.name) != []
        finally:
            for client in clients:
                client.close()


def _pid_of(holder: str) -> int:
    return int(holder.split("@", 1)[0])


def _by_process(store: redis.Redis) -> dict[int, set[int]]:
    out: dict[int, set[int]] = {}
    for bucket, holder in lease_holders(store).items():
        out.setdefault(_pid_of(holder), set()).add(bucket)
    return out


def test_scheduler_processes_share_and_take_over_a_killed_ones_buckets(tmp_path: Path) -> None:
    stack: Stack = start_stack(tmp_path, workers=0, scheduler=False)
    client = redis.Redis.from_url(stack.valkey.url, decode_responses=True)
    lease = lock_seconds(settings_of(stack.env))
    try:
        names = [f"scheduler{n}" for n in range(3)]
        pids = {name: stack.start("scheduler", name).pid for name in names}

        def shared_by(living: Sequence[str]) -> bool:
            held = _by_process(client)
            wanted = {pids[n] for n in living}
            share = fair_share(B, len(living))
            return (
                set(held) == wanted
                and sum(len(b) for b in held.values()) == B
                and all(len(b) <= share for b in held.values())
            )

        _poll(lambda: shared_by(names), 60, "three processes share the buckets")
        _assert_shared(client, [h for h in set(lease_holders(client).values())])
        lost = _by_process(client)[pids["scheduler0"]]
        stack.kill("scheduler0")  # kill -9: its leases are left to expire
        killed_at = now_ms()
        took = _poll(lambda: shared_by(names[1:]), lease + 3, "the killed one's buckets")
        survivors = _by_process(client)
        assert lost <= survivors[pids["scheduler1"]] | survivors[pids["scheduler2"]]
        # Every bucket passed over since the kill: /readyz's scheduler check holds.
        _poll(
            lambda: (oldest_pass(client.hgetall(keys.SCHEDULER_PASSES)) or 0) > killed_at,
            5,
            "every bucket passed again",
        )
        # A clean stop lets go at once: the last one holds all well before a lease.
        assert stack.terminate("scheduler1", 20) == 0
        handed = _poll(lambda: shared_by(names[2:]), 0.6 * lease, "a stopped one's buckets")
        print(f"taken over after kill -9 in {took:.1f} s (lease {lease:g} s); "
              f"after a clean stop in {handed:.1f} s")  # fmt: skip
    finally:
        client.close()
        stack.stop()
