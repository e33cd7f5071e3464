"""The whole service on a cluster (tests/support/cluster.py), for the tests that run it there
(the pipeline, resharding, failover): the store the cluster, the Celery broker a Valkey
apart, the API, a worker and the scheduler as processes; and what those tests ask of it."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from redis.crc import key_slot

from tests.integration.conftest import Api, wait_for
from tests.support.cluster import Cluster, owner
from tests.support.receiver import Receiver
from tests.support.stack import ADMIN_KEY, Stack, migrate_log, service_env
from webhook_service.client import AsyncWebhookClient
from webhook_service.embedded import EmbeddedValkey, free_port, start_valkey
from webhook_service.store import keys

TYPE = "cluster.order"


@contextlib.contextmanager
def service_on(
    cluster: Cluster, directory: Path, extra: Mapping[str, str] | None = None
) -> Iterator[Stack]:
    """The service's processes on ``cluster``, every one stopped after; ``extra``: more of
    their environment (WEBHOOK_DURABILITY, say)."""
    broker = start_valkey(directory / "broker")
    env = service_env(
        cluster.url(),
        {
            "WEBHOOK_BROKER_URL": broker.url,
            "WEBHOOK_DATA_DIR": str(directory),
            "WEBHOOK_PORT": str(free_port()),
            **(extra or {}),
        },
    )
    stack = Stack(directory, broker, env)
    try:
        migrate_log(env)
        # As an operator would before the first start: the store commands run on a cluster.
        migrated = command(env, "migrate")
        assert migrated.returncode == 0, migrated.stdout
        stack.start("api")
        stack.start("worker", "worker0")
        stack.start("scheduler")
        yield stack
    finally:
        stack.stop()


@pytest.fixture(scope="module")
def cluster_stack(tmp_path_factory: pytest.TempPathFactory, cluster: Cluster) -> Iterator[Stack]:
    """The service on the module's ``cluster`` fixture."""
    with service_on(cluster, tmp_path_factory.mktemp("stack")) as stack:
        yield stack


@pytest.fixture
async def api(cluster_stack: Stack) -> AsyncIterator[Api]:
    """A client of the cluster stack's API (in place of the conftest's in-process one)."""
    async with api_of(cluster_stack) as client:
        yield client


def command(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``webhook-service <args>`` run to its end."""
    return subprocess.run(
        [sys.executable, "-m", "webhook_service", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def base_url(stack: Stack) -> str:
    return f"http://127.0.0.1:{stack.env['WEBHOOK_PORT']}"


@contextlib.asynccontextmanager
async def api_of(stack: Stack) -> AsyncIterator[Api]:
    """A client of the stack's API, once it answers /healthz."""
    async with aiohttp.ClientSession() as session:
        client = Api(session, base_url(stack))

        async def up() -> bool:
            api_process = stack.processes["api"]
            assert api_process.poll() is None, logs(stack)
            try:
                status, _, _ = await client.call("GET", "/healthz", key=None)
            except aiohttp.ClientError:
                return False
            return status == 200

        await wait_for(up, timeout=30)
        yield client


def slot_of(bucket: int) -> int:
    return key_slot(keys.head(bucket).encode())


def primary_of(cluster: Cluster, bucket: int) -> EmbeddedValkey:
    """The primary serving ``bucket`` now."""
    return owner(cluster, slot_of(bucket))


def uids_on_one_primary(
    cluster: Cluster, count: int, prefix: str
) -> tuple[list[str], EmbeddedValkey]:
    """``count`` uids (``prefix``-n) of distinct buckets, all on one primary that does not
    hold the default application's bucket; and that primary."""
    serving = {bucket: primary_of(cluster, bucket) for bucket in keys.all_buckets()}
    taken = serving[keys.DEFAULT_BUCKET]
    chosen: dict[int, dict[int, str]] = {}
    for n in range(5000):
        uid = f"{prefix}-{n}"
        bucket = keys.uid_bucket(uid)
        primary = serving[bucket]
        if primary == taken:
            continue
        picked = chosen.setdefault(primary.port, {})
        picked.setdefault(bucket, uid)
        if len(picked) == count:
            return list(picked.values()), primary
    raise AssertionError(f"no {count} buckets found on one primary")


def logs(stack: Stack) -> str:
    """Every process's log, each under its name."""
    return "\n".join(
        f"--- {path.name}\n{path.read_text(errors='replace')}"
        for path in sorted(stack.directory.glob("*.log"))
    )


def errors_logged(stack: Stack) -> list[str]:
    """The lines logged at ERROR. A WARNING may carry a traceback of an error handled (the
    worker's attempt counts, a transaction refused TRYAGAIN, are kept for its next try); no
    ERROR is one."""
    return [line for line in logs(stack).splitlines() if " ERROR " in line]


async def app_with_endpoint(api: Api, receiver: Receiver, uid: str) -> tuple[str, str]:
    """A new application of ``uid`` with one endpoint at the receiver's ``uid`` path, for
    TYPE; its secret given to the receiver. Returns the two ids."""
    status, app, _ = await api.call("POST", "/v1/applications", json={"name": uid, "uid": uid})
    assert status == 201, app
    status, endpoint, _ = await api.call(
        "POST",
        f"/v1/applications/{app['id']}/endpoints",
        json={"url": receiver.url(uid), "event_types": [TYPE]},
    )
    assert status == 201, endpoint
    receiver.secrets.setdefault(uid, []).append(endpoint["secret"])
    return app["id"], endpoint["id"]


class ToApp(AsyncWebhookClient):
    """Our client, sending every event to one application: ``produce`` sends to the default
    one, and picks a client per event in turn, so a client per application spreads the load
    over them."""

    def __init__(self, app: str, base: str, session: aiohttp.ClientSession) -> None:
        super().__init__(base, ADMIN_KEY, session=session)
        self._app = app

    async def send(
        self, app: str, event_type: str, data: Mapping[str, Any], *args: Any, **options: Any
    ) -> str:
        return await super().send(self._app, event_type, data, *args, **options)
