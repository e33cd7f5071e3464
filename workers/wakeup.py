"""Publishing wake-ups: Celery messages that carry delivery ids, in batches."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from celery import Celery

from webhook_service.store.keys import QUEUE_FRESH, QUEUE_RETRY
from workers.celery_app import TASK_DELIVER

log = logging.getLogger(__name__)


class CeleryWaker:
    """Synchronous publisher; a lost wake-up only delays a delivery (the scheduler repairs)."""

    def __init__(self, app: Celery, batch_size: int) -> None:
        self._app = app
        self._batch = batch_size

    def wake_sync(self, delivery_ids: Sequence[str], *, retry: bool) -> None:
        queue = QUEUE_RETRY if retry else QUEUE_FRESH
        for start in range(0, len(delivery_ids), self._batch):
            chunk = list(delivery_ids[start : start + self._batch])
            try:
                self._app.send_task(TASK_DELIVER, args=[chunk], queue=queue)
            except Exception:
                # Stored already; the due entry will wake these deliveries after the grace.
                log.warning("wake-up not published; the scheduler will repair it", exc_info=True)


class AsyncCeleryWaker:
    """For the API's event loop: kombu's publish blocks, so it runs on one side thread."""

    def __init__(self, waker: CeleryWaker) -> None:
        self._waker = waker
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="wakeup")

    async def wake(self, delivery_ids: Sequence[str], *, retry: bool) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(
            self._thread, lambda: self._waker.wake_sync(delivery_ids, retry=retry)
        )

    def close(self) -> None:
        self._thread.shutdown(wait=True)


class NoWakeups:
    """Tick mode (WEBHOOK_WAKE_WORKERS=false): no worker would ever consume a wake-up, so
    none is published; each delivery's due entry brings it to the next tick instead."""

    async def wake(self, delivery_ids: Sequence[str], *, retry: bool) -> None:
        return None

    def close(self) -> None:
        return None
