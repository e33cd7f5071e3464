"""Strict durability's wait on a cluster of 3 primaries with a replica each
(store/durability.py): it reaches the primary of the event's bucket, on the connection it
publishes on, and waits for that primary's replica; a replica that stalls fails it (so the
API answers 503 rather than a 202 a failover could lose), and a primary left with no
replica at all confirms on its own disk."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import AsyncIterator, Iterator

import pytest
import redis
import redis.asyncio

from tests.integration.conftest import wait_for
from tests.support.cluster import Cluster, running
from tests.support.cluster_service import primary_of
from webhook_service.embedded import EmbeddedValkey
from webhook_service.store import keys
from webhook_service.store.connect import async_client
from webhook_service.store.durability import TIMEOUT_MS, StrictDurability

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running(tmp_path_factory.mktemp("strict"), aof=True, replicas=1) as formed:
        yield formed


@pytest.fixture
async def client(cluster: Cluster) -> AsyncIterator[redis.asyncio.Redis]:
    connected = async_client(cluster.url())
    yield connected
    await connected.aclose()


def replica_of(cluster: Cluster, primary: EmbeddedValkey) -> EmbeddedValkey:
    return cluster.replicas[cluster.nodes.index(primary)]


def offsets(cluster: Cluster, node: EmbeddedValkey) -> int:
    plain = redis.Redis(host="127.0.0.1", port=node.port, password=cluster.password)
    try:
        return int(plain.info("replication")["master_repl_offset"])
    finally:
        plain.close()


def write_apart(cluster: Cluster, bucket: int, value: str) -> None:
    """A write to ``bucket`` on a connection of its own, as another request's would be: the
    wait must cover it all the same."""
    plain = redis.Redis(
        host="127.0.0.1", port=primary_of(cluster, bucket).port, password=cluster.password
    )
    try:
        plain.set(keys.head(bucket) + "strict-probe", value)
    finally:
        plain.close()


def bucket_apart(cluster: Cluster, primary: EmbeddedValkey) -> int:
    """A bucket some other primary serves."""
    return next(b for b in keys.all_buckets() if primary_of(cluster, b) != primary)


async def test_every_buckets_write_is_confirmed_by_its_primary_and_replica(
    cluster: Cluster, client: redis.asyncio.Redis
) -> None:
    strict = StrictDurability(client, 0)
    for bucket in keys.all_buckets():
        write_apart(cluster, bucket, "x")
        assert await strict.confirm(bucket)
        # WAIT returned only once the replica had what the primary had written.
        primary = primary_of(cluster, bucket)
        # (Less a PING the primary sends its replica now and then, which may be in flight.)
        assert offsets(cluster, replica_of(cluster, primary)) >= offsets(cluster, primary) - 64


async def test_a_stalled_replica_fails_its_primarys_confirmations_only(
    cluster: Cluster, client: redis.asyncio.Redis
) -> None:
    strict = StrictDurability(client, 0)
    bucket = 7
    primary = primary_of(cluster, bucket)
    replica = replica_of(cluster, primary)
    elsewhere = bucket_apart(cluster, primary)
    os.kill(replica.process.pid, signal.SIGSTOP)
    try:
        write_apart(cluster, bucket, "stalled")
        began = time.monotonic()
        assert not await strict.confirm(bucket)
        assert time.monotonic() - began >= TIMEOUT_MS / 1000 * 0.9
        assert await strict.confirm(elsewhere)
    finally:
        os.kill(replica.process.pid, signal.SIGCONT)
    assert await strict.confirm(bucket)


async def test_a_primary_whose_replica_is_gone_confirms_on_its_own_disk(
    cluster: Cluster, client: redis.asyncio.Redis
) -> None:
    """Run last in this module: the replica stays dead."""
    strict = StrictDurability(client, 0)
    bucket = 11
    primary = primary_of(cluster, bucket)
    replica_of(cluster, primary).kill()

    async def replica_dropped() -> bool:
        plain = redis.Redis(host="127.0.0.1", port=primary.port, password=cluster.password)
        try:
            return int(plain.info("replication")["connected_slaves"]) == 0
        finally:
            plain.close()

    await wait_for(replica_dropped, timeout=10)
    write_apart(cluster, bucket, "alone")
    began = time.monotonic()
    assert await strict.confirm(bucket)
    assert time.monotonic() - began < TIMEOUT_MS / 1000 / 2
