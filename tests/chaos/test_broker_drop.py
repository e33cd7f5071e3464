"""Valkey killed while workers hold unacked wake-ups: the workers live on and deliver.

kombu 5.7's ack emulation killed a worker that lost its broker with messages unacked (the
AttributeError of celery/kombu#582's shape); ack emulation is off now (workers/celery_app.py),
and this drives exactly that case: a stream of wake-ups in flight while Valkey dies.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from tests.integration.conftest import Api, create_endpoint, delivery_statuses, send_event, wait_for
from tests.support.receiver import Receiver
from tests.support.stack import Stack, start_stack
from webhook_service.config import Settings
from webhook_service.store.keys import QUEUE_FRESH
from webhook_service.wakeup import TASK_DELIVER
from workers.celery_app import make_app

pytestmark = pytest.mark.chaos


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    running = start_stack(tmp_path_factory.mktemp("drop"), workers=2)
    yield running
    running.stop()


def _flood(stack: Stack, stop: threading.Event) -> None:
    """Wake-ups for a delivery that does not exist: each is leased as 'gone', harmlessly,
    but keeps the workers receiving and acking while the broker dies under them."""
    app = make_app(Settings(redis_url=stack.valkey.url))
    while not stop.is_set():
        try:
            app.send_task(TASK_DELIVER, args=["dlv_none"], queue=QUEUE_FRESH)
        except Exception:
            time.sleep(0.05)


async def test_workers_survive_broker_loss_with_wakeups_in_flight(
    stack: Stack, api: Api, receiver: Receiver
) -> None:
    endpoint = await create_endpoint(api, receiver, "after", ["drop.after"])
    for round_ in range(4):
        stop = threading.Event()
        floods = [threading.Thread(target=_flood, args=(stack, stop)) for _ in range(2)]
        for flood in floods:
            flood.start()
        time.sleep(1.5)
        stack.restart_valkey(1.0)
        time.sleep(1.5)
        stop.set()
        for flood in floods:
            flood.join()
        alive = {name: p.poll() is None for name, p in stack.processes.items()}
        assert all(alive.values()), (round_, alive)

        event_id = await send_event(api, "drop.after", {"round": round_})

        async def delivered(event_id: str = event_id) -> bool:
            return await delivery_statuses(api, event_id) == {endpoint["id"]: "succeeded"}

        await wait_for(delivered, timeout=60)
