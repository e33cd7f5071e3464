"""expunge.lua through its wrapper (EventStore.expunge_payload, ExpungeArgs, Expunged): every
answer it gives, the typed reply, and what it left in Redis."""

from __future__ import annotations

import json

import pytest
from redis.asyncio import Redis

from tests.support import buckets
from webhook_service.ids import new_id
from webhook_service.store import keys
from webhook_service.store.events import EventStore, Expunged, ExpungeOutcome
from webhook_service.store.scripts import Scripts

pytestmark = pytest.mark.integration

NOW = 1_800_000_000_000
TYPE = "script.expunge"


async def _event(events: EventStore) -> str:
    accepted = await events.accept(
        event_id=new_id("msg", NOW), event_type=TYPE, body="{}", key_id="key_1", now_ms=NOW,
        budget=3, grace_ms=1000, idempotency=None, wakeup=None, backlog_max=1_000_000,
    )  # fmt: skip
    return accepted.event_id


async def _outbox(client: Redis) -> list[dict[str, str]]:
    """The log outbox's entries, oldest first: their fields."""
    entries = await buckets.outbox(client)
    return [fields for _, fields in entries]


async def test_expunged_deletes_the_body_once_and_logs_it(client: Redis) -> None:
    events = EventStore(client, Scripts(client))
    event_id = await _event(events)
    outbox = await buckets.outbox_length(client)

    expunged = await events.expunge_payload(event_id, NOW + 5, sender="key_1")

    assert expunged == Expunged(ExpungeOutcome.EXPUNGED)
    event = await client.hgetall(keys.event(event_id))
    assert "body" not in event and (event["type"], event["expunged"]) == (TYPE, str(NOW + 5))
    (record,) = (await _outbox(client))[outbox:]
    assert json.loads(record[keys.OutboxField.EXPUNGE]) == {"ev": event_id, "t": NOW + 5}

    # Again, by an admin (any sender): the same answer, and nothing more written.
    again = await events.expunge_payload(event_id, NOW + 9, sender=None)
    assert again.outcome is ExpungeOutcome.EXPUNGED
    assert await client.hget(keys.event(event_id), "expunged") == str(NOW + 5)
    assert await buckets.outbox_length(client) == outbox + 1


async def test_missing_for_no_event_or_another_keys(client: Redis) -> None:
    events = EventStore(client, Scripts(client))
    event_id = await _event(events)
    outbox = await buckets.outbox_length(client)

    unknown = await events.expunge_payload(new_id("msg", NOW), NOW + 5, sender=None)
    assert unknown == Expunged(ExpungeOutcome.MISSING)
    # Another key's event is as good as none: its body stays.
    other_key = await events.expunge_payload(event_id, NOW + 5, sender="key_2")
    assert other_key == Expunged(ExpungeOutcome.MISSING)
    assert await client.hget(keys.event(event_id), "body") == "{}"
    assert await buckets.outbox_length(client) == outbox
