"""The whole service on a Valkey Cluster (issue 20 items 1-2): the store a real cluster of 3
primaries with a replica each (tests/support/cluster.py), named by a ``redis+cluster://``
URL, and the Celery broker a plain Valkey apart (WEBHOOK_BROKER_URL). The API, a worker and
the scheduler run as processes; two applications whose buckets live on different primaries
get events, a failing receiver's retries arrive, the admin routes answer, and no process
ever logs a cross-slot refusal. With the broker apart, a new event's wake-ups are published
after the ingest step (none lands in the cluster), and a lost one is repaired by the
delivery's due entry."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster

from tests.integration.conftest import Api, wait_for
from tests.support.cluster import Cluster, running
from tests.support.cluster_service import (
    TYPE,
    api,
    app_with_endpoint,
    cluster_stack,
    command,
    logs,
)
from tests.support.receiver import Receiver
from tests.support.stack import ADMIN_KEY, Stack
from webhook_service.crypto import generate_master_key
from webhook_service.store import keys
from webhook_service.store.connect import ServerUnfit, check_server, primaries, sync_client

__all__ = ["api", "cluster_stack"]

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def _uids_apart(cluster: Cluster) -> tuple[str, str]:
    """Two application uids whose buckets are served by different primaries, neither the
    default application's."""
    client = RedisCluster(
        host="127.0.0.1", port=cluster.seed.port, password=cluster.password, decode_responses=True
    )
    try:

        def port_of(bucket: int) -> int:
            # redis-py leaves get_node_from_key untyped.
            return int(client.get_node_from_key(keys.due(bucket)).port)  # type: ignore[no-untyped-call]

        taken = {port_of(keys.DEFAULT_BUCKET)}
        chosen: list[str] = []
        for n in range(1000):
            uid = f"cluster-app-{n}"
            if (port := port_of(keys.uid_bucket(uid))) not in taken:
                taken.add(port)
                chosen.append(uid)
            if len(chosen) == 2:
                return chosen[0], chosen[1]
    finally:
        client.close()
    raise AssertionError("no two uids on different primaries")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running(tmp_path_factory.mktemp("cluster"), aof=True, replicas=1) as formed:
        yield formed


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    running_receiver = Receiver()
    await running_receiver.start()
    yield running_receiver
    await running_receiver.stop()


async def _send(api: Api, app_id: str, n: int) -> str:
    status, body, _ = await api.call(
        "POST", f"/v1/applications/{app_id}/events", json={"type": TYPE, "data": {"n": n}}
    )
    assert status == 202, body
    event_id: str = body["id"]
    return event_id


async def _delivered(receiver: Receiver, name: str, count: int) -> None:
    async def done() -> bool:
        return len({wid for (ep, wid), n in receiver.taken.items() if ep == name and n}) >= count

    await wait_for(done, timeout=45)


async def test_the_service_runs_whole_on_a_cluster_with_the_broker_apart(
    cluster: Cluster, cluster_stack: Stack, api: Api, receiver: Receiver
) -> None:
    uid_a, uid_b = _uids_apart(cluster)
    app_a, endpoint_a = await app_with_endpoint(api, receiver, uid_a)
    app_b, _ = await app_with_endpoint(api, receiver, uid_b)
    # B's receiver fails its first two requests: the retries must be delivered too.
    receiver.behaviours[uid_b] = lambda _name, seen: 500 if seen <= 2 else 200
    for n in range(3):
        await _send(api, app_a, n)
        await _send(api, app_b, n)
    await _delivered(receiver, uid_a, 3)
    await _delivered(receiver, uid_b, 3)
    assert all(r.verified for r in receiver.received)
    assert receiver.requests[uid_b] == 5  # the two refused, retried once each
    assert max(receiver.taken.values()) == 1  # no duplicate
    for path in (
        "/v1/deliveries",
        "/v1/events",
        f"/v1/applications/{app_a}/events",
        f"/v1/applications/{app_b}/deliveries",
        f"/v1/applications/{app_a}/endpoints/{endpoint_a}/stats",
        "/v1/applications",
        "/readyz",
    ):
        status, body, _ = await api.call("GET", path)
        assert status == 200, (
            path,
            body if path == "/readyz" else "",
            logs(cluster_stack)[-3000:],
        )
    headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
    async with api.session.get(api.base + "/metrics", headers=headers) as response:
        assert response.status == 200
        assert "webhook_store_readable 1.0" in await response.text()
    assert "CROSSSLOT" not in logs(cluster_stack)
    assert "Traceback" not in logs(cluster_stack), logs(cluster_stack)


async def test_a_lost_wake_up_is_repaired_by_the_due_set(
    cluster: Cluster, cluster_stack: Stack, api: Api, receiver: Receiver
) -> None:
    uid = "cluster-lost-wakeup"
    app_id, _ = await app_with_endpoint(api, receiver, uid)
    # No worker takes the wake-up before it is thrown away.
    cluster_stack.terminate("worker0")
    await _send(api, app_id, 0)
    broker = redis.Redis.from_url(cluster_stack.valkey.url, decode_responses=True)
    try:
        deadline = time.monotonic() + 10
        # Published to the broker after the step (from the API, not inside the script)...
        while not int(broker.llen(keys.QUEUE_FRESH)):
            assert time.monotonic() < deadline, "no wake-up reached the broker"
            time.sleep(0.05)
        # ...and lost there.
        broker.delete(keys.QUEUE_FRESH)
    finally:
        broker.close()
    cluster_stack.start("worker", "worker0")
    # The scheduler claims the delivery's due entry after the grace (2 s) and wakes it again.
    await _delivered(receiver, uid, 1)
    assert "CROSSSLOT" not in logs(cluster_stack)


async def test_the_admin_writes_run_on_a_cluster(
    cluster_stack: Stack, api: Api, receiver: Receiver
) -> None:
    """Those that take a transaction (WATCH/MULTI) or a SCAN: an event type, an API key bound
    to an application, an endpoint deleted, and an application deleted whole (its keys
    swept with a SCAN of its bucket's primary)."""
    status, body, _ = await api.call(
        "POST", "/v1/event-types", json={"name": "cluster.audit", "description": "on a cluster"}
    )
    assert status == 201, body
    app_id, endpoint_id = await app_with_endpoint(api, receiver, "cluster-admin")
    status, body, _ = await api.call(
        "POST",
        "/v1/api-keys",
        json={"name": "tenant", "scopes": ["events:write"], "application": app_id},
    )
    assert status == 201, body
    status, body, _ = await api.call("DELETE", f"/v1/api-keys/{body['id']}")
    assert status == 204, body
    await _send(api, app_id, 0)
    await _delivered(receiver, "cluster-admin", 1)
    status, body, _ = await api.call("DELETE", f"/v1/applications/{app_id}/endpoints/{endpoint_id}")
    assert status == 204, body
    status, job, _ = await api.call("DELETE", f"/v1/applications/{app_id}")
    assert status == 202, job

    async def done() -> bool:
        _, found, _ = await api.call("GET", f"/v1/jobs/{job['id']}")
        assert found["state"] != "failed", found
        return bool(found["state"] == "done")

    await wait_for(done, timeout=30)
    status, _, _ = await api.call("GET", f"/v1/applications/{app_id}")
    assert status == 404
    logged = logs(cluster_stack)
    assert "CROSSSLOT" not in logged
    assert "Traceback" not in logged, logged[-5000:]


def _cluster_lists(cluster: Cluster) -> list[Any]:
    found: list[Any] = []
    for node in cluster.nodes:
        client = redis.Redis(host="127.0.0.1", port=node.port, password=cluster.password)
        try:
            found += client.keys(keys.QUEUE_FRESH + "*")
        finally:
            client.close()
    return found


def test_the_start_up_checks_run_on_every_primary(cluster: Cluster) -> None:
    client = sync_client(cluster.url())
    try:
        assert len(primaries(client)) == 3
        assert check_server(client, "everysec") is False
        # WAITAOF on every primary: strict mode's wait (store/durability.py) is usable.
        assert check_server(client, "strict") is True
        # One primary that may evict is enough to refuse the store.
        primaries(client)[2].config_set("maxmemory-policy", "allkeys-lru")
        try:
            with pytest.raises(ServerUnfit, match="allkeys-lru"):
                check_server(client, "everysec")
        finally:
            primaries(client)[2].config_set("maxmemory-policy", "noeviction")
    finally:
        client.close()


def test_rotate_master_key_runs_on_a_cluster(cluster_stack: Stack) -> None:
    """Last: the running processes keep the old key, and could no longer open the secrets."""
    rotated = command(cluster_stack.env, "rotate-master-key", "--new-key", generate_master_key())
    assert rotated.returncode == 0, rotated.stdout + rotated.stderr
    assert "CROSSSLOT" not in rotated.stdout + rotated.stderr


def test_no_wake_up_is_ever_pushed_into_the_cluster(cluster: Cluster, cluster_stack: Stack) -> None:
    assert _cluster_lists(cluster) == []
