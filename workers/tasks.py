"""The one Celery task: hand a batch of deliveries, named by id, to this process's engine."""

from __future__ import annotations

import logging
import time
from typing import Any

from celery.signals import worker_process_shutdown

from webhook_service.store.refusals import refused
from webhook_service.wakeup import TASK_DELIVER
from workers import runtime
from workers.celery_app import app

log = logging.getLogger(__name__)


@app.task(name=TASK_DELIVER)
def deliver(delivery_ids: str) -> None:
    # Returns once the batch (a comma list of ids) is leased: from then on the lease, not
    # this message, keeps the deliveries safe, so acking now loses nothing.
    rt = runtime.current()
    try:
        skipped = rt.call(rt.engine.start(delivery_ids.split(",")))
    except Exception as exc:
        if not refused(exc, "leasing deliveries"):
            raise
        # The wake-up is dropped: each delivery's due entry brings it back once the store
        # writes again. Sleeping holds this process's next wake-up back too, so a refusing
        # store is asked less and less often (at most every few seconds) by each process.
        time.sleep(rt.backoff.next())
        return
    rt.backoff.reset()
    if skipped:
        log.debug("not sent now: %s", {r.delivery_id: r.status for r in skipped})


@worker_process_shutdown.connect
def _close_runtime(**_: Any) -> None:
    runtime.shutdown()
