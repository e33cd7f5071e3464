"""One event loop, one Redis client and one keep-alive HTTP session per worker process.

Celery has no async tasks. Each process runs its loop in a thread of its own, so sends go
on between tasks: a task leases its batch on that loop and returns, and the sends finish in
the background (see ``DeliveryEngine.start``). Built lazily on the first task, so it is
created after the prefork fork, never before.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from webhook_service import tracing
from webhook_service.config import Settings
from webhook_service.delivery.engine import DeliveryEngine
from webhook_service.delivery.transport import Transport
from webhook_service.event_loop import loop_factory
from webhook_service.store.connect import RedisTimeouts, async_client
from webhook_service.store.refusals import Backoff
from webhook_service.wiring import aiohttp_transport, delivery_engine
from workers.celery_app import SETTINGS

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass
class Runtime:
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread
    engine: DeliveryEngine
    transport: Transport
    drain_seconds: float
    # How long a task waits after the store refused its lease (tasks.deliver).
    backoff: Backoff = field(default_factory=Backoff)

    def call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def close(self) -> None:
        # A warm shutdown lets the sends in flight finish; what does not finish in time is
        # leased, and the scheduler wakes it again when the lease runs out.
        left = self.call(self.engine.drain(self.drain_seconds))
        if left:
            log.warning("%d sends still in flight at shutdown; their leases will expire", left)
        self.call(self.transport.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


_current: Runtime | None = None


def build(settings: Settings) -> Runtime:
    # Here, in the pool's child after the prefork fork, not in the parent: the span
    # exporter's thread would not survive the fork, and only the children send.
    tracing.setup("worker")
    loop = loop_factory(settings)()
    thread = threading.Thread(target=loop.run_forever, name="delivery-loop", daemon=True)
    thread.start()

    async def make() -> tuple[DeliveryEngine, Transport]:
        transport = aiohttp_transport(settings)
        client = async_client(settings.effective_redis_url, RedisTimeouts.of(settings))
        return delivery_engine(settings, client, transport), transport

    engine, transport = asyncio.run_coroutine_threadsafe(make(), loop).result()
    return Runtime(loop, thread, engine, transport, settings.request_timeout + 2)


def current() -> Runtime:
    global _current
    if _current is None:
        _current = build(SETTINGS)
    return _current


def shutdown() -> None:
    global _current
    if _current is not None:
        _current.close()
        _current = None
    tracing.shutdown()  # the last attempts' spans leave before the child does
