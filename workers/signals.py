"""Celery signal hooks: our log format in every worker, and the heartbeat /readyz reads.

The heartbeat rides on Celery's own (``heartbeat_sent``, every 2 s from the worker's
consumer loop; worker heartbeats go out even with task events off): a fresh beat in Redis
means a worker is up and its consumer is turning, not merely that a process exists.
"""

from __future__ import annotations

import logging
from typing import Any

import redis
from celery.signals import heartbeat_sent, setup_logging

from webhook_service import logs
from webhook_service.store import liveness
from webhook_service.store.connect import RedisTimeouts, sync_client
from webhook_service.store.refusals import refused
from webhook_service.timeutil import now_ms
from workers.celery_app import SETTINGS

log = logging.getLogger(__name__)

# Celery beats every 2 s; Redis needs to hear far less often than the 30 s /readyz allows.
BEAT_EVERY_MS = 5000


class _Heartbeat:
    def __init__(self) -> None:
        self._client: redis.Redis | None = None
        self._last_ms = 0

    def __call__(self, worker: str) -> None:
        now = now_ms()
        if now - self._last_ms < BEAT_EVERY_MS:
            return
        if self._client is None:
            settings = SETTINGS
            self._client = sync_client(settings.effective_redis_url, RedisTimeouts.of(settings))
        try:
            liveness.beat(self._client, worker, now)
            self._last_ms = now
        except redis.RedisError as exc:
            if not refused(exc, "writing the worker heartbeat"):
                log.warning("heartbeat not written; /readyz will say so if this lasts")


_heartbeat = _Heartbeat()


@setup_logging.connect
def _setup_logging(**_: Any) -> None:
    # Connected, this keeps Celery from configuring logging its own way.
    logs.setup(SETTINGS, "worker")


@heartbeat_sent.connect
def _beat(sender: Any, **_: Any) -> None:
    _heartbeat(str(sender.eventer.hostname))
