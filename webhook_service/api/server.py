"""Running the API process: connect, check the server, wire the services, serve."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from aiohttp import web
from celery import Celery

from webhook_service.api.app import create_app
from webhook_service.api.context import Services
from webhook_service.config import Settings
from webhook_service.history.database import async_engine
from webhook_service.history.reader import HistoryReader
from webhook_service.history.revive import Reviver
from webhook_service.redaction import configured_secrets, install_log_redaction
from webhook_service.store import schema
from webhook_service.store.apikeys import ApiKeyStore
from webhook_service.store.applications import ApplicationStore
from webhook_service.store.connect import (
    RedisTimeouts,
    async_client,
    check_server,
    replicas_to_confirm,
    sync_client,
)
from webhook_service.store.deliveries import DeliveryStore
from webhook_service.store.durability import StrictDurability
from webhook_service.store.endpoints import EndpointStore
from webhook_service.store.events import EventStore
from webhook_service.store.jobs import JobStore
from webhook_service.store.portal import PortalStore
from webhook_service.store.ratelimit import RateLimiter
from webhook_service.store.scripts import Scripts
from webhook_service.wakeup import AsyncCeleryWaker, CeleryWaker, NoWakeups
from webhook_service.wiring import ConfigurationError, guard, secret_box

log = logging.getLogger(__name__)


async def build_app(settings: Settings, publisher: Celery | None) -> web.Application:
    """``publisher``: the Celery app wake-ups go out through (the CLI wires the workers'
    own); None only where no worker consumes them (tick mode, WEBHOOK_WAKE_WORKERS=false)."""
    if settings.admin_key is None:
        raise ConfigurationError("WEBHOOK_ADMIN_KEY is not set")
    url = settings.effective_redis_url
    timeouts = RedisTimeouts.of(settings)
    checker = sync_client(url, timeouts)
    try:
        strict = check_server(checker, settings.durability)
        # `webhook-service api` checked already (store/schema.py); this is for an app built
        # in-process (tests, bench), which must stamp a fresh store before it writes to it.
        schema.check(checker)
        replicas = replicas_to_confirm(checker, url) if strict else 0
    finally:
        checker.close()
    client = async_client(url, timeouts)
    scripts = Scripts(client)
    waker: AsyncCeleryWaker | NoWakeups = NoWakeups()
    if settings.wake_workers:
        if publisher is None:
            raise ConfigurationError("wake-ups need a Celery app to publish through")
        waker = AsyncCeleryWaker(
            CeleryWaker(publisher, settings.batch_size), inline=not settings.broker_apart
        )
    box = secret_box(settings)
    install_log_redaction(configured_secrets(settings))
    deliveries = DeliveryStore(client, scripts)
    events = EventStore(client, scripts)
    # The history's reads go to WEBHOOK_LOG_READ_URL's standby when there is one. A revival
    # reads the primary: what it puts back in Redis is written to the log again (its attempt
    # count numbers the next attempt; an expunge the standby has not replayed yet would
    # bring a payload back), so it must be the latest.
    log_engine = async_engine(settings)
    latest = HistoryReader(log_engine, deliveries, events, settings.log_timeout)
    read_engine, history = log_engine, latest
    if settings.log_read_url is not None:
        read_engine = async_engine(settings, read=True)
        history = HistoryReader(read_engine, deliveries, events, settings.log_timeout)
    svc = Services(
        settings=settings,
        redis=client,
        events=events,
        endpoints=EndpointStore(client, scripts),
        deliveries=deliveries,
        waker=waker,
        guard=guard(settings),
        box=box,
        strict=StrictDurability(client, replicas) if strict else None,
        jobs=JobStore(client, ttl_s=7 * 86400),
        api_keys=ApiKeyStore(client, box),
        applications=ApplicationStore(client, scripts),
        portal=PortalStore(client),
        limiter=RateLimiter(scripts),
        history=history,
        reviver=Reviver(latest, scripts, int(settings.hot_seconds * 1000)),
    )
    app = create_app(svc)

    async def lifecycle(_: web.Application) -> AsyncIterator[None]:
        yield
        await waker.aclose()
        if read_engine is not log_engine:
            await read_engine.dispose()
        await log_engine.dispose()
        await client.aclose()

    app.cleanup_ctx.append(lifecycle)
    return app
