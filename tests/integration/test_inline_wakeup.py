"""The ingest script queues a new event's wake-ups itself, as messages kombu and Celery read.

The API here runs on a Valkey of its own with no worker, so the messages stay on the queue
to be looked at; every pipeline test shows a real worker consuming them.
"""

from __future__ import annotations

import pytest
from kombu import Connection

from tests.integration.conftest import Api, create_endpoint, serve_api, settings_for
from tests.support.receiver import Receiver
from tests.support.stack import Stack
from webhook_service.embedded import EmbeddedValkey
from webhook_service.store.keys import QUEUE_FRESH
from workers.celery_app import TASK_DELIVER


async def _event_deliveries(api: Api, event_id: str) -> set[str]:
    status, event, _ = await api.call("GET", f"/v1/events/{event_id}")
    assert status == 200
    return {d["id"] for d in event["deliveries"]}


async def test_one_message_per_batch_of_deliveries_in_the_ingest_step(
    stack: Stack, valkey: EmbeddedValkey, receiver: Receiver
) -> None:
    settings = settings_for(stack).model_copy(update={"redis_url": valkey.url, "batch_size": 2})
    async with serve_api(settings) as (_, api):
        for name in ("w1", "w2", "w3"):
            await create_endpoint(api, receiver, name, ["wake.inline"])
        status, accepted, _ = await api.call(
            "POST", "/v1/events", json={"type": "wake.inline", "data": {}}
        )
        assert status == 202
        deliveries = await _event_deliveries(api, accepted["id"])

    with Connection(valkey.url) as connection:
        queue = connection.SimpleQueue(QUEUE_FRESH)
        messages = [queue.get(timeout=2), queue.get(timeout=2)]
        with pytest.raises(queue.Empty):
            queue.get(timeout=0.2)
        queue.close()
    woken: list[str] = []
    for message in messages:
        assert message.headers["task"] == TASK_DELIVER
        assert message.headers["id"].startswith(accepted["id"] + ".")
        assert message.delivery_info["routing_key"] == QUEUE_FRESH
        (ids,), kwargs, _embed = message.decode()
        assert kwargs == {}
        woken += ids.split(",")
    # Two messages of at most two ids, covering the three deliveries once each.
    assert sorted(len(m.decode()[0][0].split(",")) for m in messages) == [1, 2]
    assert sorted(woken) == sorted(deliveries)
