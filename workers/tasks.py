"""The one Celery task: deliver a batch of deliveries named by id."""

from __future__ import annotations

import logging
from typing import Any

from celery.signals import worker_process_shutdown

from workers import runtime
from workers.celery_app import TASK_DELIVER, app

log = logging.getLogger(__name__)


@app.task(name=TASK_DELIVER)
def deliver(delivery_ids: list[str]) -> None:
    rt = runtime.current()
    outcomes = rt.loop.run_until_complete(rt.engine.run(delivery_ids))
    log.debug("batch done: %s", {o.delivery_id: o.status for o in outcomes})


@worker_process_shutdown.connect
def _close_runtime(**_: Any) -> None:
    runtime.shutdown()
