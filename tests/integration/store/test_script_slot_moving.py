"""A script called while its bucket's slot moves to another primary (a reshard,
tests/support/cluster.py ``move_slot``): the runner declares the bucket's guard key
(store/scripts.py), the server answers TRYAGAIN until the move is over, and the call then
runs whole on the new owner: never part-way on the source, nor on the target before the
bucket's keys are there (where the script would read them as missing)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis
from redis.crc import key_slot

from tests.support.cluster import Cluster, move_slot, owner, running
from webhook_service.embedded import EmbeddedValkey
from webhook_service.store import keys
from webhook_service.store.applications import (
    ApplicationOutcome,
    ApplicationRecord,
    ApplicationStore,
    new_app_id,
)
from webhook_service.store.connect import async_client
from webhook_service.store.scripts import Scripts, guarded

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

FILLER = 2000  # keys: 20 MIGRATE batches
PAUSE = 0.05  # s after each batch: the slot moves for a second or so


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running(tmp_path_factory.mktemp("moving")) as formed:
        yield formed


@pytest.fixture
async def store(cluster: Cluster) -> AsyncIterator[redis.asyncio.Redis]:
    client = async_client(cluster.url())
    yield client
    await client.aclose()


def _keys_in(cluster: Cluster, node: EmbeddedValkey, slot: int) -> int:
    plain = redis.Redis(host="127.0.0.1", port=node.port, password=cluster.password)
    try:
        return int(plain.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot))  # type: ignore[no-untyped-call]
    finally:
        plain.close()


def _same_bucket(uid: str) -> str:
    bucket = keys.uid_bucket(uid)
    return next(
        other
        for n in range(10_000)
        if keys.uid_bucket(other := f"{uid}-{n}") == bucket and other != uid
    )


def test_the_guard_is_of_the_bucket_s_slot() -> None:
    script_keys = [keys.due(7)]
    declared = guarded(script_keys)
    assert declared[0] == script_keys[0] and declared[1] == keys.slot_guard(script_keys[0])
    assert key_slot(declared[1].encode()) == key_slot(script_keys[0].encode())
    # A key of no bucket is a script's only key: routed by ASK alone, nothing to guard.
    assert guarded(["elsewhere"]) == ["elsewhere"]


async def test_a_script_waits_out_its_slot_s_move_and_runs_on_the_new_owner(
    cluster: Cluster, store: redis.asyncio.Redis
) -> None:
    apps = ApplicationStore(store, Scripts(store))
    now = int(time.time() * 1000)
    first_uid = "slot-moving"
    second_uid = _same_bucket(first_uid)
    first = ApplicationRecord(new_app_id(now, first_uid), "first", first_uid, {}, None, now, now)
    second = ApplicationRecord(
        new_app_id(now, second_uid), "second", second_uid, {}, None, now, now
    )
    assert await apps.create(first) is ApplicationOutcome.CREATED
    bucket = keys.uid_bucket(first_uid)
    slot = key_slot(keys.head(bucket).encode())
    source = owner(cluster, slot)
    target = next(node for node in cluster.nodes if node is not source)
    padding = redis.Redis(host="127.0.0.1", port=source.port, password=cluster.password)
    try:
        padding.mset({f"filler:{keys.tag(bucket)}:{n}": "x" for n in range(FILLER)})
    finally:
        padding.close()

    with ThreadPoolExecutor(1) as pool:
        moving = asyncio.get_running_loop().run_in_executor(
            pool, lambda: move_slot(cluster, slot, source, target, between_batches=PAUSE)
        )
        # The slot is migrating: part of its keys moved, not all.
        while _keys_in(cluster, source, slot) > FILLER:
            await asyncio.sleep(0.01)
        assert not moving.done()
        outcome = await apps.create(second)
        # The call waited for the move: it ended no earlier than the slot's last key moved
        # (move_slot may still be telling the third primary of the new owner).
        assert _keys_in(cluster, source, slot) == 0
        moved = await moving
    assert outcome is ApplicationOutcome.CREATED
    assert moved >= FILLER + 2  # the filler, and both applications' keys, none refused
    assert owner(cluster, slot) is target
    assert (await apps.get(first.id)) is not None
    assert (await apps.get(second.id)) is not None
