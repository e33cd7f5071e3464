"""The producer client for internal services: ``send(app, type, data)`` → the stored event's
id, ``app`` being the application's id or uid (``"default"`` for a single-tenant service);
and ``portal_link(app, ...)``, a link to that application's subscriber portal.

Each send carries an idempotency key (yours, or one made for it) on every one of its own
tries, so a retry after a lost answer never stores the event twice.
"""

from webhook_service.client.aio import AsyncWebhookClient
from webhook_service.client.attempts import Backoff, Schedule
from webhook_service.client.errors import (
    APIError,
    AuthenticationError,
    ClientError,
    IdempotencyKeyReused,
    InvalidEvent,
    ProblemDetails,
    ServerError,
    TransportError,
    WebhookError,
)
from webhook_service.client.portal_links import PortalLink
from webhook_service.client.sync import WebhookClient

__all__ = [
    "APIError",
    "AsyncWebhookClient",
    "AuthenticationError",
    "Backoff",
    "ClientError",
    "IdempotencyKeyReused",
    "InvalidEvent",
    "PortalLink",
    "ProblemDetails",
    "Schedule",
    "ServerError",
    "TransportError",
    "WebhookClient",
    "WebhookError",
]
