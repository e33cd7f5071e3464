"""The Celery application: Redis as broker, every delivery-relevant setting owned here.

Celery messages are only wake-ups carrying delivery ids; Redis holds the truth. So the
settings below aim at "never lose a wake-up silently, never hold one so long it is sent
twice", and the scheduler repairs whatever slips through anyway.
"""

from __future__ import annotations

from typing import Any

from celery import Celery
from kombu import Queue

from webhook_service.config import Settings
from webhook_service.store.keys import QUEUE_FRESH, QUEUE_RETRY
from webhook_service.store.redis_url import celery_broker
from workers.broker import transport_for

TASK_DELIVER = "whs.deliver"


def celery_config(settings: Settings) -> dict[str, Any]:
    # A task holds a batch for at most one lease; kombu must not hand the same message to
    # another worker before that (the double-send bug of a too-short ack deadline).
    time_limit = int(settings.lease_seconds) + 30
    visibility = max(3600, time_limit * 4)
    transport: dict[str, Any] = {"visibility_timeout": visibility}
    broker_url = None
    if settings.redis_url is not None:
        # sentinel:// becomes kombu's own Sentinel spelling, with the primary's name.
        broker_url, sentinel_options = celery_broker(settings.redis_url)
        transport.update(sentinel_options)
    return {
        "broker_url": broker_url,
        "broker_transport": transport_for(broker_url) if broker_url else None,
        "broker_transport_options": transport,
        "result_backend_transport_options": transport,
        "visibility_timeout": visibility,
        "broker_connection_retry_on_startup": True,
        "broker_connection_max_retries": None,
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "task_ignore_result": True,
        "task_time_limit": time_limit,
        "worker_soft_shutdown_timeout": settings.request_timeout + 5,
        "worker_enable_soft_shutdown_on_idle": True,
        "task_serializer": "json",
        "accept_content": ["json"],
        "task_default_queue": QUEUE_FRESH,
        "task_queues": (Queue(QUEUE_FRESH), Queue(QUEUE_RETRY)),
        "worker_hijack_root_logger": False,
        # Task events (received, started, succeeded...) and worker heartbeats: what Flower
        # shows. Not the "sent" event: it costs the API a PUBLISH per wake-up (a quarter of
        # its CPU in the benchmark profile) and tells Flower only that a task was queued.
        "worker_send_task_events": True,
        "task_send_sent_event": False,
        "imports": ("workers.tasks", "workers.signals"),
    }


def make_app(settings: Settings) -> Celery:
    app = Celery("webhook_service", set_as_current=False)
    app.conf.update(celery_config(settings))
    return app


app = make_app(Settings())
