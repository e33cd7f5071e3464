"""One event loop, one Redis client and one keep-alive HTTP session per worker process.

Celery has no async tasks; each process keeps a loop alive between tasks so connections
and sessions are reused, and a task runs one batch of deliveries on it concurrently.
Built lazily on the first task, so it is created after the prefork fork, never before.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from webhook_service.config import Settings
from webhook_service.delivery.engine import DeliveryEngine
from webhook_service.delivery.transport import AiohttpTransport, Transport
from webhook_service.store.connect import async_client
from webhook_service.store.deliveries import DeliveryStore
from webhook_service.store.scripts import Scripts
from webhook_service.wiring import guard, retry_policy, secret_box


@dataclass
class Runtime:
    loop: asyncio.AbstractEventLoop
    engine: DeliveryEngine
    transport: Transport

    def close(self) -> None:
        self.loop.run_until_complete(self.transport.close())
        self.loop.close()


_current: Runtime | None = None


def build(settings: Settings) -> Runtime:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    client = async_client(settings.effective_redis_url)

    async def make_transport() -> Transport:
        return AiohttpTransport(
            guard(settings),
            total_timeout=settings.request_timeout,
            connect_timeout=settings.connect_timeout,
            body_limit=settings.response_body_limit,
        )

    transport = loop.run_until_complete(make_transport())
    engine = DeliveryEngine(
        DeliveryStore(client, Scripts(client)),
        transport,
        secret_box(settings),
        retry_policy(settings),
        lease_ms=int(settings.lease_seconds * 1000),
    )
    return Runtime(loop, engine, transport)


def current() -> Runtime:
    global _current
    if _current is None:
        _current = build(Settings())
    return _current


def shutdown() -> None:
    global _current
    if _current is not None:
        _current.close()
        _current = None
