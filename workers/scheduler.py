"""The scheduler: moves due deliveries (retries, lost wake-ups, expired leases) to the queues.

Every delivery that needs a worker sits in its bucket's ``due`` sorted set scored by when.
Several schedulers share the buckets: each pass first renews this scheduler's leases
(store/bucket_leases.py: each bucket leased to one scheduler at a time, at most
ceil(buckets / live schedulers) each), then claims what is due in the buckets it holds,
publishes their wake-ups, and notes the time of its pass over each (``/readyz`` and the
scheduler-lag metric read the oldest). A dead scheduler's leases expire and the others take
its buckets. The shipper thread beside this loop ships the same buckets' log outboxes
(history/shipper.py), and whichever scheduler holds the upkeep lock keeps the log's
retention.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Protocol

import redis

from webhook_service.config import Settings
from webhook_service.store.bucket_leases import BucketLeases, record_passes
from webhook_service.store.due import claim_due_sync
from webhook_service.store.refusals import Backoff, refused
from webhook_service.store.scripts import Scripts, drop_other_releases
from webhook_service.timeutil import now_ms

log = logging.getLogger(__name__)

CLAIM_LIMIT = 1000


def lock_seconds(settings: Settings) -> float:
    """How long a bucket's lease lasts unrenewed: ten passes, at least 5 s. The others take
    a dead scheduler's buckets that long after it dies; a scheduler that cannot reach Redis
    stops working on its buckets once that long has passed since its last renewal."""
    return max(5.0, settings.scheduler_interval * 10)


class Publisher(Protocol):
    def wake_sync(self, delivery_ids: Sequence[str], *, retry: bool) -> None: ...


class Scheduler:
    def __init__(
        self,
        client: redis.Redis,
        publisher: Publisher,
        settings: Settings,
        leases: BucketLeases | None = None,
    ) -> None:
        self._client = client
        self._scripts = Scripts(client)
        self._publisher = publisher
        self._settings = settings
        # The shipper of this process works on the same buckets (cli.py hands it these).
        self.leases = leases or BucketLeases(client, lock_seconds(settings))

    def tick(self) -> int:
        """One pass over the buckets this scheduler holds; returns how many deliveries were
        woken."""
        held = self.leases.renew()
        if not held:
            return 0
        grace_ms = int(self._settings.wakeup_grace * 1000)
        now = now_ms()
        claimed = claim_due_sync(self._scripts, now, CLAIM_LIMIT, grace_ms, held)
        if claimed.fresh:
            self._publisher.wake_sync(claimed.fresh, retry=False)
        if claimed.retries:
            self._publisher.wake_sync(claimed.retries, retry=True)
        record_passes(self._client, held, now_ms())
        return len(claimed)

    def run(self, stop: threading.Event) -> None:
        log.info("scheduler running")
        try:
            dropped = drop_other_releases(self._client)
        except redis.exceptions.RedisError:
            # Left for the next scheduler to start: they cost memory, never a call.
            log.warning("the libraries of other releases were not deleted", exc_info=True)
        else:
            if dropped:
                log.info("deleted the libraries of other releases: %s", ", ".join(dropped))
        backoff = Backoff()
        while not stop.is_set():
            try:
                woken = self.tick()
            except redis.exceptions.RedisError as exc:
                if not refused(exc, "claiming due deliveries"):
                    log.warning("store error; the scheduler retries", exc_info=True)
                # The leases stay counted until they would have expired unrenewed.
                stop.wait(max(self._settings.scheduler_interval, backoff.next()))
                continue
            backoff.reset()
            # A full claim means more is due: go again at once.
            if woken < CLAIM_LIMIT:
                stop.wait(self._settings.scheduler_interval)
        self.leases.give_up()
        log.info("scheduler stopped")
