"""Everything one bench run stands on: Valkey with AOF, the API, the scheduler, the receiver.

Workers (ours or the naive baseline) come and go per measurement; the rest lives for the
whole run. Between measurements :meth:`Rig.reset` empties the service's keys and every
queue, so no phase inherits another's backlog. The service keeps its delivery log in
SQLite in the rig's directory, migrated before any of its processes starts. A rig can run
the service from another checkout instead (an earlier release, bench/bench_log.py): its
processes import that tree, and it has no SQL log to migrate.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import socket
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import aiohttp
import orjson
import redis

from bench.http_load import RequestFactory, build_request
from bench.naive.app import QUEUE as NAIVE_QUEUE
from bench.naive.app import app as naive_app
from bench.payload import event_data
from bench.procs import Child, free_port, spawn, wait_port
from bench.receiver import ReceiverControl
from signer import generate_secret
from webhook_service.config import Settings
from webhook_service.crypto import generate_master_key
from webhook_service.embedded import EmbeddedValkey, start_valkey
from webhook_service.history.database import sync_engine, upgrade
from webhook_service.history.shipper import outbox_length
from webhook_service.store.keys import (
    PREFIX,
    QUEUE_FRESH,
    QUEUE_RETRY,
    SCHEMA,
    all_buckets,
    delivery,
    due,
    release,
)

# kombu's bookkeeping of unacknowledged messages; the bindings (_kombu.binding.*) must stay,
# or publishing to the queues fails until they are declared again.
_KOMBU_KEYS = ("unacked", "unacked_index", "unacked_mutex")


Kind = Literal["ours", "naive"]
# Endpoints one application may hold: the fan-out phase's widest event goes to 1 000 of the
# default application's, ten times the service's default cap.
_MOST_ENDPOINTS = 2000


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
    # The checkout the service's processes run from: None for this one.
    tree: Path | None = None
    children: dict[str, Child] = field(default_factory=dict)
    pools: dict[Kind, Workers] = field(default_factory=dict)

    @classmethod
    async def start(
        cls,
        directory: Path,
        *,
        log_level: str,
        tree: Path | None = None,
        settings: Mapping[str, str] | None = None,
        jemalloc: bool = True,
    ) -> Rig:
        """``settings``: WEBHOOK_* variables every service process gets on top of the rig's;
        ``jemalloc`` off: Valkey on libc's malloc (embedded.start_valkey)."""
        await asyncio.to_thread(directory.mkdir, parents=True, exist_ok=True)
        valkey = start_valkey(directory / "valkey", preload_jemalloc=jemalloc)
        api_port, receiver_port = free_port(), free_port()
        admin_key = "bench-" + secrets.token_urlsafe(24)
        data_dir = directory / "data"
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("WEBHOOK_")},
            "WEBHOOK_REDIS_URL": valkey.url,
            "WEBHOOK_ADMIN_KEY": admin_key,
            "WEBHOOK_MASTER_KEY": generate_master_key(),
            "WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8",
            "WEBHOOK_PORT": str(api_port),
            "WEBHOOK_LOG_LEVEL": log_level,
            "WEBHOOK_DATA_DIR": str(data_dir),
            "WEBHOOK_MAX_ENDPOINTS_PER_APP": str(_MOST_ENDPOINTS),
            **(settings or {}),
            "NAIVE_BROKER_URL": valkey.url,
        }
        if tree is None:
            await asyncio.to_thread(_migrate_log, data_dir)
        else:
            # Ahead of the editable install of this checkout on the path.
            env["PYTHONPATH"] = str(tree)
        # The bench publishes the naive baseline's tasks itself, to the same server.
        naive_app.conf.update(broker_url=valkey.url)
        # Celery's own reset of its connection pools (what it does in a forked child): a rig
        # started earlier in this process left them pointing at its stopped server.
        naive_app._after_fork()  # type: ignore[attr-defined]  # celery-types leaves it out
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
            tree,
        )
        try:
            rig.launch("receiver", ["-m", "bench.receiver", "--port", str(receiver_port)])
            wait_port(rig.children["receiver"], receiver_port)
            rig.service("api", "api")
            wait_port(rig.children["api"], api_port)
            rig.service("scheduler", "scheduler")
        except BaseException:
            await rig.close()
            raise
        return rig

    def launch(self, name: str, args: list[str], **env: str) -> Child:
        """A process of this checkout (the receiver, a floor, the naive baseline)."""
        return self._spawn(name, args, None, env)

    def service(self, name: str, role: str, **env: str) -> Child:
        """``webhook-service <role>``, from the rig's tree."""
        return self._spawn(name, ["-m", "webhook_service", role], self.tree, env)

    def _spawn(self, name: str, args: list[str], cwd: Path | None, env: dict[str, str]) -> Child:
        full = {**self.env, **env}
        if cwd is None:
            full.pop("PYTHONPATH", None)
        child = spawn(name, args, full, self.directory, cwd)
        self.children[name] = child
        return child

    @property
    def has_log(self) -> bool:
        """Whether the service keeps its delivery log in SQL (and so releases finished work
        from Redis): this checkout does, an earlier release does not."""
        return self.tree is None

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
            child = self.service("worker", "worker", WEBHOOK_WORKER_CONCURRENCY=str(concurrency))
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
        await self.until_ready(pool)
        return pool

    async def until_ready(self, pool: Workers, within: float = 60.0) -> None:
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

    @contextlib.contextmanager
    def scheduler_paused(self) -> Iterator[None]:
        """SIGSTOP: its passes and its log shipper stand still; its locks simply expire."""
        pid = self.children["scheduler"].pid
        os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(pid, signal.SIGCONT)

    def valkey_cpu(self) -> float:
        """CPU seconds Valkey has used, as it counts them itself."""
        cpu = self.redis.info("cpu")
        return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])

    def reset(self) -> None:
        """Every queue and every key of the service: the next phase starts from nothing."""
        self.purge_queues()
        # Save the schema marker: a process starting on endpoints with none would take the
        # store for one written before markers, and refuse it.
        self._unlink_matching(PREFIX + "*", keep=SCHEMA)
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

    async def until_shipped(self, within: float = 60.0) -> None:
        """Until the log outbox is empty: the shipper has taken every record to SQL (at once
        on a rig without a log, which has no outbox)."""
        await self._until(lambda: outbox_length(self.redis) == 0, within, "outbox shipped")

    async def until_idle(self, within: float = 60.0) -> None:
        """Until no delivery is due or leased (every one is final) and no wake-up waits in a
        queue: those the scheduler sent again for deliveries that waited past their grace
        stay there until a worker has taken them (the workers must be running)."""

        def idle() -> bool:
            if self._in_buckets(due):
                return False
            return not (self.redis.llen(QUEUE_FRESH) or self.redis.llen(QUEUE_RETRY))

        await self._until(idle, within, "idle")

    async def until_released(self, within: float = 60.0) -> None:
        """Until Redis holds no finished delivery: shipped and released, which takes no
        longer than that with WEBHOOK_HOT_SECONDS=0. Only once the cheap counts say so is
        the key space scanned, so that the wait costs Valkey next to nothing."""

        def released() -> bool:
            if outbox_length(self.redis) or self._in_buckets(release):
                return False
            return next(self.redis.scan_iter(delivery("*"), count=2000), None) is None

        await self._until(released, within, "finished work released")

    def _in_buckets(self, name: Callable[[int], str]) -> int:
        """The members of one sorted set a bucket (keys.due, keys.release), all added."""
        with self.redis.pipeline(transaction=False) as pipe:
            for bucket in all_buckets():
                pipe.zcard(name(bucket))
            return sum(int(n) for n in pipe.execute())

    async def _until(self, test: Callable[[], bool], within: float, what: str) -> None:
        deadline = time.monotonic() + within
        while not await asyncio.to_thread(test):
            if time.monotonic() > deadline:
                raise RuntimeError(f"not {what} within {within}s")
            await asyncio.sleep(0.1)

    def purge_queues(self) -> None:
        """Pending wake-ups and tasks, and the due set that would re-publish them."""
        for pattern in (QUEUE_FRESH + "*", QUEUE_RETRY + "*", NAIVE_QUEUE + "*", "bench:*"):
            self._unlink_matching(pattern)
        self.redis.unlink(*(due(b) for b in all_buckets()), *_KOMBU_KEYS)

    def _unlink_matching(self, pattern: str, keep: str = "") -> None:
        batch: list[str] = []
        for key in self.redis.scan_iter(pattern, count=2000):
            if key == keep:
                continue
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

    def event_request(
        self, event_type: str, port: int | None = None, body_bytes: int | None = None
    ) -> RequestFactory:
        """POST /v1/events, to the API or to a floor server on ``port``; ``body_bytes``: the
        size of the body the API will store and send (bench/payload.py)."""
        data = (
            {"invoice": 42, "amount": 1999}
            if body_bytes is None
            else event_data(event_type, body_bytes)
        )
        body = orjson.dumps({"type": event_type, "data": data})
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


def _migrate_log(data_dir: Path) -> None:
    """The SQLite log in ``data_dir`` brought to this checkout's schema, as `up` does."""
    engine = sync_engine(Settings(data_dir=data_dir, log_url=None))
    try:
        upgrade(engine)
    finally:
        engine.dispose()
