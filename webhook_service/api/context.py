"""What every handler needs, behind one typed app key."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from aiohttp import web
from redis.asyncio import Redis

from webhook_service.config import Settings
from webhook_service.crypto import SecretBox
from webhook_service.delivery.ssrf import Guard
from webhook_service.history.reader import HistoryReader
from webhook_service.history.revive import Reviver
from webhook_service.store.apikeys import ApiKeyStore
from webhook_service.store.applications import ApplicationStore
from webhook_service.store.deliveries import DeliveryStore
from webhook_service.store.durability import StrictDurability
from webhook_service.store.endpoints import EndpointStore
from webhook_service.store.events import EventStore, InlineWakeup
from webhook_service.store.jobs import JobStore
from webhook_service.store.portal import PortalStore
from webhook_service.store.ratelimit import RateLimiter


class Waker(Protocol):
    """Sends the wake-ups that bring deliveries to a worker; ids only, never payloads.
    ``inline``: how the ingest script writes a new event's wake-ups itself, if it may."""

    inline: InlineWakeup | None

    async def wake(self, delivery_ids: Sequence[str], *, retry: bool) -> None: ...


@dataclass
class Services:
    settings: Settings
    redis: Redis
    events: EventStore
    endpoints: EndpointStore
    deliveries: DeliveryStore
    waker: Waker
    guard: Guard
    box: SecretBox
    # WEBHOOK_DURABILITY=strict's wait before a 202, where the server offers it.
    strict: StrictDurability | None
    jobs: JobStore
    api_keys: ApiKeyStore
    applications: ApplicationStore
    # Portal grants and sessions (webhook_service/portal_access.py).
    portal: PortalStore
    limiter: RateLimiter
    # Every history read: the SQL log, with Redis for what is still in flight.
    history: HistoryReader
    # An admin's retry, a recovery, a replay or an expunge of what has left Redis.
    reviver: Reviver


SERVICES = web.AppKey("services", Services)


def services(request: web.Request) -> Services:
    return request.app[SERVICES]
