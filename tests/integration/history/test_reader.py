"""The history reader against a real Valkey and a real log, filled by the real scripts and the
real shipper: every filter and cursor gives what Redis says (the truth for what happened),
a pending delivery shows its latest state, a read by id finds what the shipper has not
shipped yet and what Redis has let go, a sparse page stops within its budget, and a log that
cannot be read is one exception, while what Redis holds is still read by id."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest
from redis.asyncio import Redis

from tests.support.log_away import unreachable_log_url
from tests.support.logged import LocalLog, local_log
from tests.support.postgres import log_env
from tests.support.stack import settings_of
from webhook_service.embedded import EmbeddedValkey
from webhook_service.history.database import async_engine
from webhook_service.history.filters import DeliveryFilter, EventFilter, Page
from webhook_service.history.reader import SCAN_BUDGET, HistoryReader, LogUnavailable
from webhook_service.ids import new_id
from webhook_service.store import keys
from webhook_service.store.applications import DEFAULT_APP_ID
from webhook_service.store.deliveries import (
    Attempt,
    AttemptOutcome,
    DeliveryRecord,
    DeliveryStore,
    HealthPolicy,
)
from webhook_service.store.endpoints import EndpointSaveArgs
from webhook_service.store.events import EventStore
from webhook_service.store.scripts import Scripts

pytestmark = [pytest.mark.integration, pytest.mark.both_logs]

NOW = 1_800_000_000_000
HEALTH = HealthPolicy(disable_after_ms=3_600_000, ops_budget=3)
OK, FAIL = AttemptOutcome.OK, AttemptOutcome.FAIL
ONE, TWO = "reader.one", "reader.two"
SENT = {"webhook-id": "msg_x", "content-type": "application/json"}
ANSWERED = {"content-type": "text/plain", "x-seen": "1"}


@pytest.fixture
async def log(
    tmp_path: Path,
    valkey: EmbeddedValkey,
    client: Redis,
    request: pytest.FixtureRequest,
    log_backend: str,
) -> AsyncIterator[LocalLog]:
    async with local_log(tmp_path, valkey.url, log_env(request, log_backend)) as made:
        yield made


async def _endpoint(scripts: Scripts, types: Sequence[str], at: int) -> str:
    """An endpoint of the default application, where EventStore.accept sends by default."""
    endpoint_id = new_id("ep", at)
    fields: dict[str, str | int] = {
        "url": "http://127.0.0.1:9/x", "event_types": json.dumps(list(types)),
        "operations": "0", "disabled": "0", "created": at, "updated": at,
    }  # fmt: skip
    args = EndpointSaveArgs(endpoint_id, 0, fields)
    await scripts.run("endpoint_save", args.keys(), args.argv())
    return endpoint_id


async def _accept(events: EventStore, event_type: str, at: int, key_id: str = "key_1") -> str:
    event_id = new_id("msg", at)
    accepted = await events.accept(
        event_id=event_id, event_type=event_type, body='{"data":{}}', key_id=key_id, now_ms=at,
        budget=3, grace_ms=1000, idempotency=None, wakeup=None, backlog_max=1_000_000,
    )  # fmt: skip
    assert accepted.outcome == "created"
    return event_id


async def _attempt(
    store: DeliveryStore, delivery_id: str, at: int, code: int | None, outcome: AttemptOutcome
) -> str:
    lease = await store.lease([delivery_id], "tok", at, 30_000, 10)
    (job,) = lease.jobs
    attempt = Attempt(job.attempt, at, 5, code, None if code else "timeout", "body", SENT, ANSWERED)
    recorded = await store.record(
        delivery_id=delivery_id, token="tok", now_ms=at, attempt=attempt, outcome=outcome,
        delay_ms=None if outcome is AttemptOutcome.OK else 0, health=HEALTH,
    )  # fmt: skip
    return str(recorded.status)


# What happens to each delivery, by its place (mod 5): each status, class and count occurs.
_FATES: list[list[tuple[int | None, AttemptOutcome]]] = [
    [(200, OK)],  # succeeded at once: 2xx, 1 attempt
    [(503, FAIL), (200, OK)],  # succeeded the second time
    [(503, FAIL)] * 3,  # failed: its budget of 3 spent on 5xx
    [(None, FAIL)],  # pending after a timeout
    [],  # pending, never attempted
]


def _defaults(records: list[DeliveryRecord]) -> list[DeliveryRecord]:
    return [dataclasses.replace(r, application=DEFAULT_APP_ID) for r in records]


class History:
    def __init__(self, client: Redis) -> None:
        scripts = Scripts(client)
        self.events = EventStore(client, scripts)
        self.store = DeliveryStore(client, scripts)
        self.scripts = scripts
        self.event_ids: list[str] = []
        self.keys: dict[str, str] = {}
        self.types: dict[str, str] = {}

    async def fill(self) -> list[DeliveryRecord]:
        """Three endpoints (two take ONE, one takes TWO), nine events 10 ms apart, every
        fate; the deliveries as Redis has them, with their events' application (the default
        one), which a delivery's hash leaves out."""
        self.endpoints = [
            await _endpoint(self.scripts, [ONE], NOW),
            await _endpoint(self.scripts, [ONE], NOW),
            await _endpoint(self.scripts, [TWO], NOW),
        ]
        for n in range(9):
            event_type, key_id = (ONE, "key_1") if n % 3 else (TWO, "key_2")
            event_id = await _accept(self.events, event_type, NOW + 10 * n, key_id)
            self.event_ids.append(event_id)
            self.keys[event_id], self.types[event_id] = key_id, event_type
        ids = await self.delivery_ids()
        for place, delivery_id in enumerate(ids):
            for step, (code, outcome) in enumerate(_FATES[place % 5]):
                await _attempt(self.store, delivery_id, NOW + 1000 + step, code, outcome)
        return _defaults(await self.store.get_many(ids))

    async def delivery_ids(self) -> list[str]:
        found: list[str] = []
        for event_id in self.event_ids:
            record = await self.events.get(event_id)
            assert record is not None
            found += record.delivery_ids
        return found


async def _walk(reader: HistoryReader, query: DeliveryFilter, limit: int) -> list[DeliveryRecord]:
    seen: list[DeliveryRecord] = []
    cursor: str | None = None
    for _ in range(100):
        page = await reader.list_deliveries(query, limit, cursor)
        assert len(page.items) <= limit
        seen += page.items
        if page.next_cursor is None:
            return seen
        cursor = page.next_cursor
    raise AssertionError("the cursor never ran out")


async def test_every_filter_and_cursor_gives_what_redis_says(log: LocalLog, client: Redis) -> None:
    history = History(client)
    truth = await history.fill()
    assert {r.status for r in truth} == {"succeeded", "failed", "pending"}
    log.ship()
    ep_a, _, ep_c = history.endpoints
    second, fifth = history.event_ids[2], history.event_ids[5]
    since, until = NOW + 20, NOW + 50
    queries = [
        DeliveryFilter(),
        DeliveryFilter(endpoint_id=ep_a),
        DeliveryFilter(event_id=second),
        DeliveryFilter(event_type=TWO),
        DeliveryFilter(since_ms=since),
        DeliveryFilter(until_ms=until),
        DeliveryFilter(since_ms=since, until_ms=until, endpoint_id=ep_a),
        DeliveryFilter(since_ms=NOW + 50, until_ms=NOW + 50),
        DeliveryFilter(attempts_min=2),
        DeliveryFilter(attempts_max=1),
        DeliveryFilter(attempts_min=1, attempts_max=1),
        DeliveryFilter(attempts_min=0, attempts_max=0),
        DeliveryFilter(attempts_min=2, attempts_max=2, status="succeeded"),
        DeliveryFilter(endpoint_id=ep_c, status="pending"),
        DeliveryFilter(endpoint_id=ep_a, status_class="5xx"),
        DeliveryFilter(event_type=ONE, status="failed", attempts_min=3),
        DeliveryFilter(event_id=fifth, status_class="timeout"),
        *(DeliveryFilter(status=s) for s in ("pending", "succeeded", "failed", "disabled")),
        *(DeliveryFilter(status_class=c) for c in ("2xx", "5xx", "timeout", "4xx")),
    ]
    newest_first = sorted(truth, key=lambda r: r.id, reverse=True)
    for query in queries:
        expected = [
            r
            for r in newest_first
            if query.matches(r)
            and (query.since_ms is None or r.created_ms >= query.since_ms)
            and (query.until_ms is None or r.created_ms <= query.until_ms)
        ]
        for limit in (2, 50):
            assert await _walk(log.reader, query, limit) == expected, (query, limit)
    assert len(await _walk(log.reader, DeliveryFilter(), 1)) == len(truth)


async def test_events_pages_with_their_delivery_counts(log: LocalLog, client: Redis) -> None:
    history = History(client)
    await history.fill()
    # Every event Redis holds: ours, and the operational ones the failures made.
    held = [
        await history.events.get(key.removeprefix(keys.event("")))
        async for key in client.scan_iter(match=keys.event("*"))
    ]
    truth = sorted((e for e in held if e is not None), key=lambda e: e.id, reverse=True)
    assert {e.key_id for e in truth} >= {"key_1", "key_2"}
    log.ship()
    for query in [
        EventFilter(),
        EventFilter(event_type=ONE),
        EventFilter(key_id="key_2"),
        EventFilter(key_id="key_1", event_type=ONE),
        EventFilter(key_id="key_1", event_type=TWO),
        EventFilter(since_ms=NOW + 30, until_ms=NOW + 60, event_type=ONE),
        EventFilter(since_ms=NOW + 100),
    ]:
        expected = [
            e
            for e in truth
            if query.event_type in (None, e.type)
            and query.key_id in (None, e.key_id)
            and (query.since_ms is None or e.created_ms >= query.since_ms)
            and (query.until_ms is None or e.created_ms <= query.until_ms)
        ]
        seen, cursor = [], None
        while True:
            page = await log.reader.list_events(query, 2, cursor)
            seen += page.items
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert [e.id for e in seen] == [e.id for e in expected], query
        for event, record in zip(seen, expected, strict=True):
            assert (event.type, event.key_id, event.created_ms) == (
                record.type, record.key_id, record.created_ms,
            )  # fmt: skip
            assert event.deliveries == len(record.delivery_ids)
            assert not event.payload_deleted


async def test_a_pending_delivery_shows_its_latest_state(log: LocalLog, client: Redis) -> None:
    history = History(client)
    await history.fill()
    log.ship()
    before = await history.store.get_many(await history.delivery_ids())
    waiting = next(r for r in before if r.status == "pending" and r.attempts == 0)
    # It succeeds in Redis; the shipper has not run since.
    assert await _attempt(history.store, waiting.id, NOW + 5000, 200, OK) == "succeeded"
    mine = DeliveryFilter(endpoint_id=waiting.endpoint_id)
    shown = {r.id: r for r in await _walk(log.reader, mine, 50)}[waiting.id]
    assert (shown.status, shown.attempts, shown.last_code) == ("succeeded", 1, 200)
    # Filtered as shown: no longer pending, now one of the succeeded.
    pending = DeliveryFilter(endpoint_id=waiting.endpoint_id, status="pending")
    assert waiting.id not in {r.id for r in await _walk(log.reader, pending, 50)}
    succeeded = DeliveryFilter(endpoint_id=waiting.endpoint_id, status="succeeded")
    assert waiting.id not in {r.id for r in await _walk(log.reader, succeeded, 50)}  # lags
    (record,) = await log.reader.deliveries([waiting.id])
    assert record == shown
    log.ship()
    assert waiting.id in {r.id for r in await _walk(log.reader, succeeded, 50)}


async def test_a_read_by_id_needs_no_shipper_and_outlives_redis(
    tmp_path: Path,
    valkey: EmbeddedValkey,
    client: Redis,
    request: pytest.FixtureRequest,
    log_backend: str,
) -> None:
    # Redis lets finished work go as soon as the log holds it.
    env = {"WEBHOOK_HOT_SECONDS": "0", **log_env(request, log_backend)}
    async with local_log(tmp_path, valkey.url, env) as log:
        history = History(client)
        scripts = history.scripts
        endpoint = await _endpoint(scripts, [ONE], NOW)
        event_id = await _accept(history.events, ONE, NOW)
        # Accepted, not shipped: read by id at once, from Redis.
        assert await log.reader.list_events(EventFilter(), 10, None) == Page([], None)
        event = await log.reader.get_event(event_id)
        assert event is not None and event.type == ONE and event.body == '{"data":{}}'
        (delivery,) = await log.reader.deliveries(event.delivery_ids)
        assert (delivery.endpoint_id, delivery.status) == (endpoint, "pending")
        assert await log.reader.attempt_log(delivery) == []

        assert await _attempt(history.store, delivery.id, NOW + 1, 500, FAIL) == "pending"
        assert await _attempt(history.store, delivery.id, NOW + 2, 200, OK) == "succeeded"
        (done,) = _defaults(await history.store.get_many([delivery.id]))
        log.ship()
        assert await history.store.get_many([delivery.id]) == []  # let go: the log alone has it
        assert await history.events.get(event_id) is None
        assert await log.reader.get_delivery(delivery.id) == done
        again = await log.reader.get_event(event_id)
        assert again is not None
        assert (again.type, again.key_id, again.body, again.created_ms) == (
            ONE, "key_1", '{"data":{}}', NOW,
        )  # fmt: skip
        assert again.delivery_ids == event.delivery_ids
        assert await log.reader.deliveries(again.delivery_ids) == [done]
        attempts = await log.reader.attempt_log(done)
        assert [(a.number, a.status_code) for a in attempts] == [(1, 500), (2, 200)]
        assert attempts[0].request_headers == SENT and attempts[0].response_headers == ANSWERED
        assert attempts[1].started_ms == NOW + 2 and attempts[1].response_body == "body"
        for missing in ("dlv_nothing", "dlv_" + "0" * 52, "x"):
            assert await log.reader.get_delivery(missing) is None
        assert await log.reader.get_event("msg_" + "0" * 26) is None


async def test_a_sparse_page_stops_within_its_budget_and_its_cursors_find_every_match(
    log: LocalLog, client: Redis
) -> None:
    scripts = Scripts(client)
    events = EventStore(client, scripts)
    mine = await _endpoint(scripts, [ONE, TWO], NOW)
    await _endpoint(scripts, [ONE], NOW)
    # Six matches (mine, ONE) among older events, then only deliveries that meet one filter
    # and not the other: more than a page's whole budget of rows in mine's index.
    older = [TWO] * 300
    for n in range(6):
        older[n * 50] = ONE
    newer = [TWO] * (SCAN_BUDGET + 100)
    sent: list[str] = []
    at = NOW
    for chunk_start in range(0, len(older) + len(newer), 100):
        chunk = (older + newer)[chunk_start : chunk_start + 100]
        made = [_accept(events, t, at + i) for i, t in enumerate(chunk)]
        sent += await asyncio.gather(*made)
        at += len(chunk)
    log.ship()
    query = DeliveryFilter(endpoint_id=mine, event_type=ONE)
    first = await log.reader.list_deliveries(query, 1, None)
    assert first.items == [] and first.next_cursor is not None
    read = sum(1 for e in sent[len(older) :] if "dlv_" + e[4:] >= first.next_cursor)
    assert 0 < read <= SCAN_BUDGET
    found = await _walk(log.reader, query, 1)
    expected = sorted(
        (e for e, t in zip(sent[: len(older)], older, strict=True) if t == ONE), reverse=True
    )
    assert [r.event_id for r in found] == expected  # none lost, none twice, newest first


async def test_a_log_that_cannot_be_read_is_one_exception_and_redis_still_answers(
    tmp_path: Path, valkey: EmbeddedValkey, client: Redis
) -> None:
    settings = settings_of(
        {"WEBHOOK_DATA_DIR": str(tmp_path), "WEBHOOK_LOG_URL": unreachable_log_url()}
    )
    engine = async_engine(settings)
    history = History(client)
    reader = HistoryReader(engine, history.store, history.events, settings.log_timeout)
    try:
        await _endpoint(history.scripts, [ONE], NOW)
        event_id = await _accept(history.events, ONE, NOW)
        event = await reader.get_event(event_id)
        assert event is not None
        (delivery,) = await reader.deliveries(event.delivery_ids)
        assert await reader.attempt_log(delivery) == []
        for read in (
            reader.list_deliveries(DeliveryFilter(), 10, None),
            reader.list_events(EventFilter(), 10, None),
            reader.get_delivery("dlv_" + "0" * 52),
            reader.get_event("msg_" + "0" * 26),
        ):
            with pytest.raises(LogUnavailable):
                await read
        assert await _attempt(history.store, delivery.id, NOW + 1, 500, FAIL) == "pending"
        (tried,) = await reader.deliveries([delivery.id])
        with pytest.raises(LogUnavailable):
            await reader.attempt_log(tried)
    finally:
        await engine.dispose()
