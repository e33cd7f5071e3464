"""The scheduler: moves due deliveries (retries, lost wake-ups, expired leases) to the queues.

Every delivery that needs a worker sits in the ``due`` sorted set scored by when. One pass
claims what is due and publishes its wake-ups, and notes its time (``/readyz`` and the
scheduler-lag metric read it). Only the holder of a Redis lock acts, so two schedulers never
double-move; a dead scheduler's lock expires and another takes over. Retention is the log's
(history/retention.py), kept by the shipper thread beside this loop.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Protocol

import redis

from webhook_service.config import Settings
from webhook_service.store import keys, liveness
from webhook_service.store.due import claim_due_sync
from webhook_service.store.leadership import Leadership
from webhook_service.store.refusals import Backoff, refused
from webhook_service.store.scripts import Scripts
from webhook_service.timeutil import now_ms

log = logging.getLogger(__name__)

CLAIM_LIMIT = 1000


def lock_seconds(settings: Settings) -> float:
    """How long the scheduler lock lasts unrenewed: ten passes, at least 5 s. A standby
    takes over that long after the acting scheduler dies, and a scheduler that lost Redis
    mid-pass acts again once its own lock has expired."""
    return max(5.0, settings.scheduler_interval * 10)


class Publisher(Protocol):
    def wake_sync(self, delivery_ids: Sequence[str], *, retry: bool) -> None: ...


class Scheduler:
    def __init__(self, client: redis.Redis, publisher: Publisher, settings: Settings) -> None:
        self._client = client
        self._scripts = Scripts(client)
        self._publisher = publisher
        self._settings = settings
        self._leadership = Leadership(client, keys.SCHEDULER_LOCK, lock_seconds(settings))

    def tick(self) -> int:
        """One pass; returns how many deliveries were woken."""
        if not self._leadership.hold():
            return 0
        grace_ms = int(self._settings.wakeup_grace * 1000)
        now = now_ms()
        claimed = claim_due_sync(self._scripts, now, CLAIM_LIMIT, grace_ms)
        if claimed.fresh:
            self._publisher.wake_sync(claimed.fresh, retry=False)
        if claimed.retries:
            self._publisher.wake_sync(claimed.retries, retry=True)
        liveness.tick(self._client, now_ms())
        return len(claimed)

    def run(self, stop: threading.Event) -> None:
        log.info("scheduler running")
        backoff = Backoff()
        while not stop.is_set():
            try:
                woken = self.tick()
            except redis.exceptions.RedisError as exc:
                if not refused(exc, "claiming due deliveries"):
                    log.warning("store error; the scheduler retries", exc_info=True)
                self._leadership.lost()
                stop.wait(max(self._settings.scheduler_interval, backoff.next()))
                continue
            backoff.reset()
            # A full claim means more is due: go again at once.
            if woken < CLAIM_LIMIT:
                stop.wait(self._settings.scheduler_interval)
        self._leadership.give_up("scheduler")
        log.info("scheduler stopped")
