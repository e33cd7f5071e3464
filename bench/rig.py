"""Everything one bench run stands on: Valkey with AOF, the API, the scheduler, the receiver.

Workers (ours or the naive baseline) come and go per measurement; the rest lives for the
whole run. Between measurements :meth:`Rig.reset` empties the service's keys and every
queue, so no phase inherits another's backlog.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import aiohttp
import orjson
import redis

from bench.http_load import RequestFactory, build_request
from bench.naive.app import QUEUE as NAIVE_QUEUE
from bench.naive.app import app as naive_app
from bench.procs import Child, free_port, spawn, wait_port
from bench.receiver import ReceiverControl
from signer import generate_secret
from webhook_service.crypto import generate_master_key
from webhook_service.embedded import EmbeddedValkey, start_valkey
from webhook_service.store.keys import DUE, PREFIX, QUEUE_FRESH, QUEUE_RETRY

# kombu's bookkeeping of unacknowledged messages; the bindings (_kombu.binding.*) must stay,
# or publishing to the queues fails until they are declared again.
_KOMBU_KEYS = ("unacked", "unacked_index", "unacked_mutex")


Kind = Literal["ours", "naive"]


@dataclass
class Workers:
    """A Celery worker process (ours or the naive one) kept up across runs."""

    child: Child
    node: str  # its Celery node name, where control commands go
    queue: str  # the queue it consumes, paused and resumed between runs
    concurrency: int


@dataclass
class Rig:
    directory: Path
    valkey: EmbeddedValkey
    env: dict[str, str]
    api_port: int
    admin_key: str
    receiver: ReceiverControl
    redis: redis.Redis
    session: aiohttp.ClientSession
    children: dict[str, Child] = field(default_factory=dict)
    pools: dict[Kind, Workers] = field(default_factory=dict)

    @classmethod
    async def start(cls, directory: Path, *, log_level: str) -> Rig:
        await asyncio.to_thread(directory.mkdir, parents=True, exist_ok=True)
        valkey = start_valkey(directory / "valkey")
        api_port, receiver_port = free_port(), free_port()
        admin_key = "bench-" + secrets.token_urlsafe(24)
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("WEBHOOK_")},
            "WEBHOOK_REDIS_URL": valkey.url,
            "WEBHOOK_ADMIN_KEY": admin_key,
            "WEBHOOK_MASTER_KEY": generate_master_key(),
            "WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8",
            "WEBHOOK_PORT": str(api_port),
            "WEBHOOK_LOG_LEVEL": log_level,
            "NAIVE_BROKER_URL": valkey.url,
        }
        # The bench publishes the naive baseline's tasks itself, to the same server.
        naive_app.conf.update(broker_url=valkey.url)
        session = aiohttp.ClientSession()
        rig = cls(
            directory,
            valkey,
            env,
            api_port,
            admin_key,
            ReceiverControl(receiver_port, session),
            redis.Redis.from_url(valkey.url, decode_responses=True),
            session,
        )
        try:
            rig.launch("receiver", ["-m", "bench.receiver", "--port", str(receiver_port)])
            wait_port(rig.children["receiver"], receiver_port)
            rig.launch("api", ["-m", "webhook_service", "api"])
            wait_port(rig.children["api"], api_port)
            rig.launch("scheduler", ["-m", "webhook_service", "scheduler"])
        except BaseException:
            await rig.close()
            raise
        return rig

    def launch(self, name: str, args: list[str], **env: str) -> Child:
        child = spawn(name, args, {**self.env, **env}, self.directory)
        self.children[name] = child
        return child

    def stop(self, name: str) -> None:
        self.children.pop(name).stop()

    async def workers(self, kind: Kind, concurrency: int) -> Workers:
        """A running, consuming worker of ``kind`` with ``concurrency`` prefork processes.

        Started once and kept: runs pause its queue (:meth:`pause`) instead of restarting
        it, so Celery's start-up is paid per configuration, not per run.
        """
        running = self.pools.get(kind)
        if running is not None and running.concurrency == concurrency:
            await self.resume(running)
            return running
        if running is not None:
            self.retire(kind)
        if kind == "ours":
            child = self.launch(
                "worker",
                ["-m", "webhook_service", "worker"],
                WEBHOOK_WORKER_CONCURRENCY=str(concurrency),
            )
            # The node name `webhook-service worker` gives itself.
            pool = Workers(
                child, f"whs-{child.pid}@{socket.gethostname()}", QUEUE_FRESH, concurrency
            )
        else:
            child = self.launch(
                "naive",
                [
                    "-m", "celery", "-A", "bench.naive.app", "worker", "-Q", NAIVE_QUEUE,
                    "--concurrency", str(concurrency), "--loglevel", self.env["WEBHOOK_LOG_LEVEL"],
                    "--without-mingle", "--without-gossip", "--hostname", "naive@%h",
                ],
            )  # fmt: skip
            pool = Workers(child, f"naive@{socket.gethostname()}", NAIVE_QUEUE, concurrency)
        self.pools[kind] = pool
        await self._until_ready(pool)
        return pool

    async def _until_ready(self, pool: Workers, within: float = 60.0) -> None:
        deadline = time.monotonic() + within
        while not await asyncio.to_thread(
            naive_app.control.ping, destination=[pool.node], timeout=0.5
        ):
            if not pool.child.alive() or time.monotonic() > deadline:
                raise RuntimeError(f"{pool.node} did not come up; see {pool.child.name}.log")

    async def pause(self, pool: Workers) -> None:
        """Stop consuming its queue; the process and its connections stay warm."""
        await self._control("cancel_consumer", pool)

    async def resume(self, pool: Workers) -> None:
        await self._control("add_consumer", pool)

    async def _control(self, command: str, pool: Workers) -> None:
        # Any Celery app on this broker reaches every worker's mailbox; the naive one is ours.
        call = getattr(naive_app.control, command)
        replies = await asyncio.to_thread(
            call, pool.queue, destination=[pool.node], reply=True, timeout=10.0
        )
        if not replies:
            raise RuntimeError(f"{pool.node} did not answer {command}")

    def retire(self, kind: Kind) -> None:
        pool = self.pools.pop(kind, None)
        if pool is not None:
            self.stop(pool.child.name)

    def valkey_cpu(self) -> float:
        """CPU seconds Valkey has used, as it counts them itself."""
        cpu = self.redis.info("cpu")
        return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])

    def reset(self) -> None:
        """Every queue and every key of the service: the next phase starts from nothing."""
        self.purge_queues()
        self._unlink_matching(PREFIX + "*")
        self.settle()

    def settle(self, within: float = 60.0) -> None:
        """Leave nothing of the last phase running in Valkey's background: the memory its
        UNLINKs free lazily, and an AOF rewrite. The AOF is rewritten now, while it is small,
        so that its automatic rewrite (at twice the last size) does not fork in the middle
        of a measurement: on two cores that alone put 100 ms into a latency run's p99."""
        with contextlib.suppress(redis.ResponseError):  # one is running already: wait for it
            self.redis.bgrewriteaof()
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            persistence = self.redis.info("persistence")
            busy = persistence["aof_rewrite_in_progress"] or persistence["aof_rewrite_scheduled"]
            if not busy and not self.redis.info("memory")["lazyfree_pending_objects"]:
                return
            time.sleep(0.05)
        raise RuntimeError(f"Valkey still busy in the background after {within}s")

    def purge_queues(self) -> None:
        """Pending wake-ups and tasks, and the due set that would re-publish them."""
        for pattern in (QUEUE_FRESH + "*", QUEUE_RETRY + "*", NAIVE_QUEUE + "*", "bench:*"):
            self._unlink_matching(pattern)
        self.redis.unlink(DUE, *_KOMBU_KEYS)

    def _unlink_matching(self, pattern: str) -> None:
        batch: list[str] = []
        for key in self.redis.scan_iter(pattern, count=2000):
            batch.append(key)
            if len(batch) >= 2000:
                self.redis.unlink(*batch)
                batch.clear()
        if batch:
            self.redis.unlink(*batch)

    async def api(self, method: str, path: str, body: Any = None) -> Any:
        url = f"http://127.0.0.1:{self.api_port}{path}"
        headers = {"Authorization": f"Bearer {self.admin_key}"}
        async with self.session.request(method, url, json=body, headers=headers) as reply:
            if reply.status >= 300:
                raise RuntimeError(f"{method} {path}: {reply.status} {await reply.text()}")
            return await reply.json()

    async def endpoints(self, names: Iterable[str], event_type: str) -> dict[str, str]:
        """Create one endpoint per name, all subscribed to ``event_type``; tell the receiver."""
        made: dict[str, str] = {}
        pending = list(names)
        gate = asyncio.Semaphore(16)

        async def create(name: str) -> None:
            async with gate:
                body = {"url": self.receiver.url(name), "event_types": [event_type]}
                made[name] = (await self.api("POST", "/v1/endpoints", body))["secret"]

        await asyncio.gather(*(create(n) for n in pending))
        await self.receiver.set_secrets(made)
        return made

    async def naive_targets(self, names: Iterable[str]) -> list[tuple[str, str]]:
        """A secret per name for the naive baseline, told to the receiver: (url, secret)s."""
        made = {name: generate_secret(24) for name in names}
        await self.receiver.set_secrets(made)
        return [(self.receiver.url(name), secret) for name, secret in made.items()]

    def event_request(self, event_type: str, port: int | None = None) -> RequestFactory:
        """POST /v1/events, to the API or to a floor server on ``port``."""
        body = orjson.dumps({"type": event_type, "data": {"invoice": 42, "amount": 1999}})
        headers = {
            "Authorization": f"Bearer {self.admin_key}",
            "Content-Type": "application/json",
        }
        request = build_request("POST", "/v1/events", port or self.api_port, body, headers)
        return lambda _i: request

    async def close(self) -> None:
        for name in list(self.children):
            self.stop(name)
        await self.session.close()
        self.redis.close()
        self.valkey.stop()
