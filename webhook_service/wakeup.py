"""Wake-ups: the Celery messages that carry delivery ids to the workers, in batches.

A wake-up's one argument is the comma list of its delivery ids. Most are never published
from Python: the ingest script pushes a new event's wake-ups itself, in the same atomic step
that stores the event, from the message template made here (``inline_template``; its Lua
half is ``push_wakeups`` in store/lua/common.lua), when the broker is the store. With the
broker apart (WEBHOOK_BROKER_URL, a must on a Redis Cluster), no script reaches it, and the
API publishes a new event's wake-ups after its step like every other. The others (retries,
replays, strict mode, the scheduler) go through kombu (``CeleryWaker``). The workers
consume them (workers/tasks.py, the task named ``TASK_DELIVER``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import orjson
from celery import Celery

from webhook_service.store.events import InlineWakeup
from webhook_service.store.keys import QUEUE_FRESH, QUEUE_RETRY
from webhook_service.store.refusals import refused

log = logging.getLogger(__name__)

# The one task the workers run; every wake-up names it.
TASK_DELIVER = "whs.deliver"


# A publish gives up after about a second: the deliveries are stored already and their due
# entries wake them anyway, while a publisher blocked on a dead broker would hold up every
# wake-up queued behind it (the broker connection itself retries forever, on purpose).
_PUBLISH_RETRY = {"max_retries": 3, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.5}


def inline_template(queue: str) -> str:
    """The message kombu's Redis transport pushes for ``send_task`` (Celery protocol 2), cut
    to the fields Celery and kombu read, with ``#TASK#`` standing for the task id and
    ``#IDS#`` for the comma list of ids, which the ingest script fills in (ids are
    ``[0-9A-Za-z_]``, so they need no escaping inside the JSON). Every byte here is written
    to the AOF once per event. The body stays plain JSON where kombu would base64 it: kombu
    decodes a body only when ``body_encoding`` names an encoding, and Lua has no base64."""
    task, ids = "#TASK#", "#IDS#"
    envelope = {
        "body": orjson.dumps([[ids], {}, {}]).decode(),
        "content-encoding": "utf-8",
        "content-type": "application/json",
        "headers": {"lang": "py", "task": TASK_DELIVER, "id": task, "ignore_result": True},
        "properties": {
            "delivery_info": {"exchange": "", "routing_key": queue},
            "delivery_tag": task,
            "priority": 0,
        },
    }
    return orjson.dumps(envelope).decode()


class CeleryWaker:
    """Synchronous publisher; a lost wake-up only delays a delivery (the scheduler repairs)."""

    def __init__(self, app: Celery, batch_size: int) -> None:
        self._app = app
        self.batch = batch_size

    def wake_sync(self, delivery_ids: Sequence[str], *, retry: bool) -> None:
        queue = QUEUE_RETRY if retry else QUEUE_FRESH
        for start in range(0, len(delivery_ids), self.batch):
            chunk = ",".join(delivery_ids[start : start + self.batch])
            try:
                self._app.send_task(
                    TASK_DELIVER, args=[chunk], queue=queue, retry_policy=_PUBLISH_RETRY
                )
            except Exception as exc:
                # Stored already; the due entry will wake these deliveries after the grace.
                if not refused(exc, "publishing wake-ups"):
                    log.warning("wake-up not published; the scheduler repairs it", exc_info=True)


_CLOSE_FLUSH_SECONDS = 5.0


class AsyncCeleryWaker:
    """For the API's event loop. A 202 never waits for kombu: ``wake`` queues the ids, and one
    background task publishes what has gathered, batched, from one side thread (kombu's
    publish blocks). Ids still queued when the process dies are not lost: their due entries
    bring them to a worker after the grace."""

    def __init__(self, waker: CeleryWaker, *, inline: bool = True) -> None:
        """``inline``: whether the ingest script may push a new event's wake-ups itself,
        which it can only when the broker is the store (WEBHOOK_BROKER_URL unset). With the
        broker apart, they are published from here after the step, and a lost one is
        repaired by its due entry, as in strict mode."""
        self._waker = waker
        # Only the API's ingest writes wake-ups inline; the scheduler publishes its own.
        self.inline: InlineWakeup | None = (
            InlineWakeup(QUEUE_FRESH, inline_template(QUEUE_FRESH), waker.batch) if inline else None
        )
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="wakeup")
        self._queued: dict[bool, list[str]] = {False: [], True: []}
        self._more = asyncio.Event()
        self._publisher: asyncio.Task[None] | None = None

    async def wake(self, delivery_ids: Sequence[str], *, retry: bool) -> None:
        self._queued[retry].extend(delivery_ids)
        self._more.set()
        if self._publisher is None:
            self._publisher = asyncio.create_task(self._publish_forever())

    async def _publish_forever(self) -> None:
        while True:
            await self._more.wait()
            self._more.clear()
            await self._publish_queued()

    async def _publish_queued(self) -> None:
        loop = asyncio.get_running_loop()
        for retry, ids in self._queued.items():
            if ids:
                self._queued[retry] = []
                await loop.run_in_executor(
                    self._thread, partial(self._waker.wake_sync, ids, retry=retry)
                )

    async def aclose(self) -> None:
        if self._publisher is not None:
            self._publisher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._publisher
        # One last flush, bounded: what it does not publish, the scheduler wakes later.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_CLOSE_FLUSH_SECONDS):
                await self._publish_queued()
        self._thread.shutdown(wait=False, cancel_futures=True)


class NoWakeups:
    """Tick mode (WEBHOOK_WAKE_WORKERS=false): no worker would ever consume a wake-up, so
    none is published; each delivery's due entry brings it to the next tick instead."""

    inline: InlineWakeup | None = None

    async def wake(self, delivery_ids: Sequence[str], *, retry: bool) -> None:
        return None

    async def aclose(self) -> None:
        return None
