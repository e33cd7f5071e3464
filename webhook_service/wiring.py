"""Building the long-lived parts from settings, shared by the API, workers and scheduler."""

from __future__ import annotations

from redis.asyncio import Redis

from webhook_service.config import Settings
from webhook_service.crypto import SecretBox
from webhook_service.delivery.backoff import RetryPolicy
from webhook_service.delivery.engine import DeliveryEngine
from webhook_service.delivery.ssrf import Guard
from webhook_service.delivery.transport import AiohttpTransport, EgressProxy, Transport
from webhook_service.store.deliveries import DeliveryStore, HealthPolicy
from webhook_service.store.scripts import Scripts


class ConfigurationError(RuntimeError):
    pass


def secret_box(settings: Settings) -> SecretBox:
    if settings.master_key is None:
        raise ConfigurationError(
            "WEBHOOK_MASTER_KEY is not set: endpoint secrets are sealed with it. "
            "`webhook-service up` creates one in the data dir; in production generate one "
            "with `webhook-service generate-master-key`."
        )
    previous = settings.previous_master_keys
    older = previous.get_secret_value().split(",") if previous else []
    return SecretBox(
        settings.master_key.get_secret_value(), [k.strip() for k in older if k.strip()]
    )


def guard(settings: Settings) -> Guard:
    return Guard(settings.allowed_networks, https_only=settings.https_only)


def retry_policy(settings: Settings) -> RetryPolicy:
    return RetryPolicy(settings.retry_schedule, settings.retry_jitter, settings.throttle_floor)


def health_policy(settings: Settings) -> HealthPolicy:
    return HealthPolicy(int(settings.disable_after * 1000), settings.max_attempts)


def delivery_engine(settings: Settings, client: Redis, transport: Transport) -> DeliveryEngine:
    return DeliveryEngine(
        DeliveryStore(client, Scripts(client), app_concurrency=settings.app_concurrency),
        transport,
        secret_box(settings),
        retry_policy(settings),
        health_policy(settings),
        lease_ms=int(settings.lease_seconds * 1000),
        request_timeout=settings.request_timeout,
        endpoint_concurrency=settings.endpoint_concurrency,
        max_in_flight=settings.worker_max_in_flight,
        counts_interval=settings.counts_interval,
    )


def aiohttp_transport(settings: Settings) -> AiohttpTransport:
    """Call from inside the event loop that will use it: the session binds to that loop."""
    proxy = settings.egress_proxy
    return AiohttpTransport(
        guard(settings),
        total_timeout=settings.request_timeout,
        connect_timeout=settings.connect_timeout,
        body_limit=settings.response_body_limit,
        proxy=None if proxy is None else EgressProxy.parse(proxy.get_secret_value()),
    )
