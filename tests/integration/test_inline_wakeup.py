"""The ingest script queues a new event's wake-ups itself, as messages kombu and Celery read.

The API here runs on a Valkey of its own with no worker, so the messages stay on the queue
to be looked at; every pipeline test shows a real worker consuming them.
"""

from __future__ import annotations

import redis
import redis.asyncio
from kombu import Connection
from kombu.message import Message

from tests.integration.conftest import Api, create_endpoint, serve_api, settings_for
from tests.support.receiver import Receiver
from tests.support.stack import Stack
from webhook_service.embedded import EmbeddedValkey
from webhook_service.store import keys
from webhook_service.store.deliveries import DeliveryStore
from webhook_service.store.keys import QUEUE_FRESH
from webhook_service.store.scripts import Scripts
from webhook_service.timeutil import now_ms
from webhook_service.wakeup import TASK_DELIVER


async def _send(api: Api, event_type: str) -> tuple[str, set[str]]:
    status, accepted, _ = await api.call(
        "POST", "/v1/events", json={"type": event_type, "data": {}}
    )
    assert status == 202
    status, event, _ = await api.call("GET", f"/v1/events/{accepted['id']}")
    assert status == 200
    return accepted["id"], {d["id"] for d in event["deliveries"]}


def _queued(url: str) -> list[Message]:
    with Connection(url) as connection:
        queue = connection.SimpleQueue(QUEUE_FRESH)
        messages = []
        while True:
            try:
                message = queue.get(timeout=0.5)
            except queue.Empty:
                break
            message.ack()  # or kombu puts it back when the channel closes
            messages.append(message)
        queue.close()
    return messages


def _argument(message: Message) -> list[str]:
    # Celery's message body: (args, kwargs, embed); the one argument is the ids, comma-joined,
    # the last one '+' and the message's task id: its side list of ids that joined it.
    body: tuple[tuple[str], dict[str, object], dict[str, object]] = message.decode()
    (ids,), kwargs, _embed = body
    assert kwargs == {}
    argument = ids.split(",")
    assert argument[-1] == "+" + message.headers["id"]
    return argument


def _inline(message: Message) -> list[str]:
    return _argument(message)[:-1]


def _joined(url: str, message: Message) -> list[str]:
    """The ids that joined the message while it waited, in its side list."""
    client = redis.Redis.from_url(url, decode_responses=True)
    more = client.lrange(keys.wakeup_more(message.headers["id"]), 0, -1)
    client.close()
    return [str(i) for i in more]


def _ids(url: str, message: Message) -> list[str]:
    return _inline(message) + _joined(url, message)


async def test_waiting_wakeups_take_the_next_events_ids_up_to_a_batch(
    stack: Stack, valkey: EmbeddedValkey, receiver: Receiver
) -> None:
    settings = settings_for(stack).model_copy(update={"redis_url": valkey.url, "batch_size": 2})
    async with serve_api(settings) as (_, api):
        for name in ("w1", "w2", "w3"):
            await create_endpoint(api, receiver, name, ["wake.inline"])
        first, first_deliveries = await _send(api, "wake.inline")
        second, second_deliveries = await _send(api, "wake.inline")

    messages = _queued(valkey.url)
    for message in messages:
        assert message.headers["task"] == TASK_DELIVER
        assert message.delivery_info["routing_key"] == QUEUE_FRESH
    # Oldest first: the first event's two batches, the second of which took one of the
    # second event's ids while it waited, in its side list (the message itself unchanged);
    # then the rest of the second event's.
    assert [m.headers["id"] for m in messages] == [f"{first}.1", f"{first}.3", f"{second}.2"]
    assert [len(_inline(m)) for m in messages] == [2, 1, 2]
    assert [len(_joined(valkey.url, m)) for m in messages] == [0, 1, 0]
    woken = [i for m in messages for i in _ids(valkey.url, m)]
    assert sorted(woken) == sorted(first_deliveries | second_deliveries)

    # The lease that takes the joined message takes its side list too, and ends it.
    joined = messages[1]
    expected = sorted(_ids(valkey.url, joined))
    client = redis.asyncio.Redis.from_url(valkey.url, decode_responses=True)
    leased = await DeliveryStore(client, Scripts(client)).lease(
        _argument(joined), "tok", now_ms(), 30_000, 10
    )
    assert sorted(j.delivery_id for j in leased.jobs) == expected
    assert not await client.exists(keys.wakeup_more(joined.headers["id"]))
    await client.aclose()


async def test_an_event_after_the_queue_drained_gets_a_message_of_its_own(
    stack: Stack, valkey: EmbeddedValkey, receiver: Receiver
) -> None:
    settings = settings_for(stack).model_copy(update={"redis_url": valkey.url, "batch_size": 50})
    async with serve_api(settings) as (_, api):
        await create_endpoint(api, receiver, "solo", ["wake.solo"])
        _, first_deliveries = await _send(api, "wake.solo")
        assert [_ids(valkey.url, m) for m in _queued(valkey.url)] == [sorted(first_deliveries)]
        # The noted message was consumed: nothing to join, a new one is pushed.
        second, second_deliveries = await _send(api, "wake.solo")
    messages = _queued(valkey.url)
    assert [m.headers["id"] for m in messages] == [f"{second}.1"]
    assert _ids(valkey.url, messages[0]) == sorted(second_deliveries)
