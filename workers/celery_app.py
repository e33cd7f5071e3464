"""The Celery application: Redis as broker, every delivery-relevant setting owned here.

The broker is the store unless WEBHOOK_BROKER_URL puts it apart (a plain Redis or Valkey,
Sentinel, or RabbitMQ over amqp://), as it must be for a store that is a Redis Cluster.

Celery messages are only wake-ups carrying delivery ids; Redis holds the truth, and every
pending delivery has a due entry that re-wakes it if its message is lost. So a message is
cheap to lose and is not worth keeping safe: kombu's ack emulation (an unacked hash in
Redis, two extra round trips per message, a redelivery after the visibility timeout) is
off. That also removes the double-send hazard of a visibility timeout shorter than a task.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from celery import Celery
from kombu import Queue

from webhook_service.config import Settings
from webhook_service.store.keys import QUEUE_FRESH, QUEUE_RETRY
from webhook_service.store.redis_url import celery_broker, parse_sentinel


def celery_config(settings: Settings) -> dict[str, Any]:
    # A task only leases its batch; one that takes longer than a lease is stuck.
    time_limit = int(settings.lease_seconds) + 30
    broker_url, broker_transport, transport = _broker(settings)
    return {
        "broker_url": broker_url,
        "broker_transport": broker_transport,
        "broker_transport_options": transport,
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
        "worker_send_task_events": False,
        "task_send_sent_event": False,
        "imports": ("workers.tasks", "workers.signals"),
    }


def _broker(settings: Settings) -> tuple[str | None, str | None, dict[str, Any]]:
    """The broker's URL, kombu transport (None: the URL's scheme picks it) and its options."""
    url = settings.effective_broker_url
    if url is not None and urlsplit(url).scheme not in _REDIS_SCHEMES:
        # RabbitMQ (amqp://, amqps://) or another transport kombu reads from its URL; the
        # options below are its Redis transport's. Wake-ups are still cheap to lose there.
        return url, None, {}
    # Without ack emulation, a message a worker took and did not finish is gone with the
    # worker if it dies, and back on the queue if it shuts down warm (or loses a child,
    # task_reject_on_worker_lost); the due entry covers the first case.
    transport: dict[str, Any] = {
        "ack_emulation": False,
        # kombu waits forever by default: a publish, or the worker's event loop on any
        # command, would hang on a connection the network silently dropped.
        "socket_connect_timeout": settings.redis_connect_timeout,
        "socket_timeout": settings.redis_socket_timeout,
        # Also how overdue a BRPOP reply may be before kombu drops that connection (and how
        # often it looks): a consumer on a dead link finds out by itself.
        "health_check_interval": settings.redis_health_check_interval,
        # As for our own clients: a timed-out command is not sent again (a publish that
        # timed out may have been stored; the caller's retry policy decides).
        "retry_on_timeout": False,
    }
    # kombu's Redis transport, waiting out a store that refuses BRPOP (workers/broker.py).
    broker_transport = "workers.broker:Transport"
    broker_url = None
    if url is not None:
        # sentinel:// becomes kombu's own Sentinel spelling, with the primary's name.
        broker_url, sentinel_options = celery_broker(url)
        transport.update(sentinel_options)
        if parse_sentinel(url) is not None:
            broker_transport = "workers.broker:SentinelTransport"
    return broker_url, broker_transport, transport


# What kombu's Redis transport (ours, workers/broker.py) serves; None: no URL yet.
_REDIS_SCHEMES = {"redis", "rediss", "sentinel", "unix"}


def make_app(settings: Settings) -> Celery:
    app = Celery("webhook_service", set_as_current=False)
    app.conf.update(celery_config(settings))
    return app


# The worker process's one Settings: the app, its delivery runtime and its signal handlers
# all read this, built once at import, before the prefork fork (children inherit it).
SETTINGS = Settings()
app = make_app(SETTINGS)
