"""Running the API process: connect, check the server, wire the services, serve."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from aiohttp import web

from webhook_service.api.app import create_app
from webhook_service.api.context import Services
from webhook_service.config import Settings
from webhook_service.store.connect import async_client, check_server, sync_client
from webhook_service.store.deliveries import DeliveryStore
from webhook_service.store.endpoints import EndpointStore
from webhook_service.store.events import EventStore
from webhook_service.store.scripts import Scripts
from webhook_service.wiring import ConfigurationError, guard, secret_box

log = logging.getLogger(__name__)


async def build_app(settings: Settings) -> web.Application:
    from workers.celery_app import make_app
    from workers.wakeup import AsyncCeleryWaker, CeleryWaker

    if settings.admin_key is None:
        raise ConfigurationError("WEBHOOK_ADMIN_KEY is not set")
    url = settings.effective_redis_url
    checker = sync_client(url)
    try:
        strict = check_server(checker, settings.durability)
    finally:
        checker.close()
    client = async_client(url)
    scripts = Scripts(client)
    waker = AsyncCeleryWaker(CeleryWaker(make_app(settings), settings.batch_size))
    svc = Services(
        settings=settings,
        redis=client,
        events=EventStore(client, scripts),
        endpoints=EndpointStore(client, scripts),
        deliveries=DeliveryStore(client, scripts),
        waker=waker,
        guard=guard(settings),
        box=secret_box(settings),
        strict_durability=strict,
    )
    app = create_app(svc)

    async def lifecycle(_: web.Application) -> AsyncIterator[None]:
        yield
        waker.close()
        await client.aclose()

    app.cleanup_ctx.append(lifecycle)
    return app
