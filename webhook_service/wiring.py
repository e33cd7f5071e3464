"""Building the long-lived parts from settings, shared by the API, workers and scheduler."""

from __future__ import annotations

from webhook_service.config import Settings
from webhook_service.crypto import SecretBox
from webhook_service.delivery.backoff import RetryPolicy
from webhook_service.delivery.ssrf import Guard


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
