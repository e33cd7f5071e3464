"""Applications in the log, on SQLite and on PostgreSQL: an event's application and channels
and its deliveries' application go from the outbox records into SQL and come back through
the reader, by id and in lists, with Redis's in-flight records given theirs; the application
filter pages both lists with their cursors; a batch written again changes nothing.

The outbox records and the Redis hashes are mostly written here as the scripts write them
(apps-design, "Outbox records" and the event hash's ``app``), so that the log is tested on
its contract alone, and once through the real scripts; the real shipper and reader do the
rest."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
import sqlalchemy as sa
from redis.asyncio import Redis

from tests.support.logged import LocalLog, local_log
from tests.support.postgres import log_env
from webhook_service.embedded import EmbeddedValkey
from webhook_service.history import tables, writer
from webhook_service.history.filters import DeliveryFilter, EventFilter, EventSummary
from webhook_service.history.reader import HistoryReader
from webhook_service.history.records import (
    EventLogged,
    NewDelivery,
    Record,
    ReplayLogged,
    StateLogged,
)
from webhook_service.ids import delivery_id, new_id
from webhook_service.store import keys
from webhook_service.store.applications import (
    ApplicationOutcome,
    ApplicationRecord,
    ApplicationStore,
)
from webhook_service.store.deliveries import Attempt, DeliveryRecord
from webhook_service.store.endpoints import EndpointSaveArgs
from webhook_service.store.events import EventStore
from webhook_service.store.keys import OutboxField
from webhook_service.store.scripts import Scripts

pytestmark = [pytest.mark.integration, pytest.mark.both_logs]

NOW = 1_800_000_000_000
A, B = new_id("app", NOW), new_id("app", NOW)
ONE, TWO = "apps.one", "apps.two"
OPS = "endpoint.disabled"
_seq = itertools.count(1)


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


@dataclass(frozen=True)
class Sent:
    id: str
    at: int
    type: str
    key_id: str
    application: str | None
    channels: tuple[str, ...]
    deliveries: list[str]


async def _log_event(
    client: Redis,
    event_type: str,
    at: int,
    application: str | None,
    endpoints: Sequence[str],
    *,
    channels: Sequence[str] = (),
    key_id: str = "key_1",
) -> Sent:
    """The outbox record ingest.lua (or emit_ops, for no application) writes for an event."""
    event_id = new_id("msg", at)
    ids = [delivery_id(event_id, ep) for ep in endpoints]
    record: dict[str, object] = {
        "id": event_id, "type": event_type, "t": at, "key": key_id,
        # Lua's cjson writes an empty list as {}.
        "dlv": [[d, ep, "pending"] for d, ep in zip(ids, endpoints, strict=True)] or {},
        "app": application or "",
    }  # fmt: skip
    if channels:
        record["ch"] = list(channels)
    await client.xadd(
        keys.outbox(0), {OutboxField.EVENT: orjson.dumps(record), OutboxField.BODY: "{}"}
    )
    return Sent(event_id, at, event_type, key_id, application, tuple(channels), ids)


async def _log_replay(client: Redis, sent: Sent, at: int, endpoint_id: str, part: str) -> str:
    """replay.lua's record: one new delivery of a logged event, under the replay's own id."""
    made = f"dlv_{part}{endpoint_id.partition('_')[2]}"
    record = {
        "ev": sent.id, "type": sent.type, "t": at, "dlv": [[made, endpoint_id, "pending"]],
        "app": sent.application or "",
    }  # fmt: skip
    await client.xadd(keys.outbox(0), {OutboxField.REPLAY: orjson.dumps(record)})
    return made


async def _log_success(client: Redis, delivery: str, at: int) -> None:
    """log_state's record after a 200."""
    record = {"d": delivery, "s": "succeeded", "n": 1, "u": at, "c": 200, "k": "2xx"}
    await client.xadd(keys.outbox(0), {OutboxField.STATE: orjson.dumps(record)})


async def _hold_in_redis(client: Redis, sent: Sent, at: int) -> None:
    """What ingest.lua leaves in Redis for an event in flight: its hash (with ``app``, '' for
    none, and ``ch`` when it has channels) and its deliveries' hashes, pending."""
    tails = [d.removeprefix("dlv_" + sent.id.partition("_")[2]) for d in sent.deliveries]
    await client.hset(
        keys.event(sent.id),
        mapping={
            "type": sent.type, "body": "{}", "key": sent.key_id, "dlvs": ",".join(tails),
            "live": len(tails), "app": sent.application or "",
        },
    )  # fmt: skip
    if sent.channels:
        await client.hset(keys.event(sent.id), "ch", orjson.dumps(list(sent.channels)).decode())
    for d in sent.deliveries:
        await client.hset(
            keys.delivery(d),
            mapping={"status": "pending", "attempts": 0, "budget": 3, "next_at": at, "updated": at},
        )


def _endpoints(n: int) -> list[str]:
    return [new_id("ep", NOW) for _ in range(n)]


async def _walk_events(reader: HistoryReader, query: EventFilter) -> list[EventSummary]:
    seen: list[EventSummary] = []
    cursor: str | None = None
    for _ in range(100):
        page = await reader.list_events(query, 2, cursor)
        seen += page.items
        if page.next_cursor is None:
            return seen
        cursor = page.next_cursor
    raise AssertionError("the cursor never ran out")


async def _walk_deliveries(
    reader: HistoryReader, query: DeliveryFilter, limit: int
) -> list[DeliveryRecord]:
    seen: list[DeliveryRecord] = []
    cursor: str | None = None
    for _ in range(200):
        page = await reader.list_deliveries(query, limit, cursor)
        assert len(page.items) <= limit
        seen += page.items
        if page.next_cursor is None:
            return seen
        cursor = page.next_cursor
    raise AssertionError("the cursor never ran out")


async def test_application_and_channels_are_logged_and_read_back(
    log: LocalLog, client: Redis
) -> None:
    ep_1, ep_2 = _endpoints(2)
    mine = await _log_event(client, ONE, NOW, A, [ep_1, ep_2], channels=["eu", "invoices"])
    ops = await _log_event(client, OPS, NOW + 1, None, [ep_1])
    theirs = await _log_event(client, TWO, NOW + 2, B, [ep_2])
    await _hold_in_redis(client, mine, NOW)

    # Not shipped yet: Redis answers, the application and channels from the event's hash.
    held = await log.reader.get_event(mine.id)
    assert held is not None and (held.application, held.channels) == (A, ("eu", "invoices"))
    in_flight = await log.reader.deliveries(mine.deliveries)
    assert [(r.id, r.application) for r in in_flight] == [(d, A) for d in mine.deliveries]

    log.ship()
    summaries = await log.reader.list_events(EventFilter(), 10, None)
    assert [(e.id, e.application, e.channels) for e in summaries.items] == [
        (theirs.id, B, ()), (ops.id, None, ()), (mine.id, A, ("eu", "invoices")),
    ]  # fmt: skip
    held = await log.reader.get_event(mine.id)
    assert held is not None and (held.application, held.channels) == (A, ("eu", "invoices"))
    for sent in (ops, theirs):  # the log's alone: Redis never held them here
        event = await log.reader.get_event(sent.id)
        assert event is not None
        assert (event.application, event.channels, event.delivery_ids) == (
            sent.application, (), sent.deliveries,
        )  # fmt: skip
        found = await log.reader.deliveries(sent.deliveries)
        assert [r.application for r in found] == [sent.application]

    # Pending in Redis, shown as Redis has it now, with the application the log has.
    listed = await _walk_deliveries(log.reader, DeliveryFilter(application=A), 10)
    assert [(r.id, r.status, r.application) for r in listed] == [
        (d, "pending", A) for d in sorted(mine.deliveries, reverse=True)
    ]

    # A replay's deliveries are its event's application's.
    replayed = await _log_replay(client, theirs, NOW + 10, ep_1, new_id("dlv", NOW + 10)[4:])
    log.ship()
    (record,) = await log.reader.deliveries([replayed])
    assert (record.event_id, record.application) == (theirs.id, B)
    again = await log.reader.get_event(theirs.id)
    assert again is not None and again.delivery_ids == sorted([*theirs.deliveries, replayed])


async def test_the_scripts_records_carry_the_application_and_channels(
    log: LocalLog, client: Redis
) -> None:
    scripts = Scripts(client)
    app = new_id("app", NOW)
    created = ApplicationRecord(app, "tenant", None, {}, None, NOW, NOW)
    assert await ApplicationStore(client, scripts).create(created) is ApplicationOutcome.CREATED
    endpoint_id = new_id("ep", NOW)
    fields: dict[str, str | int] = {
        "url": "http://127.0.0.1:9/x", "event_types": orjson.dumps([ONE]).decode(),
        "channels": '["eu"]', "operations": "0", "disabled": "0", "created": NOW,
        "updated": NOW,
    }  # fmt: skip
    args = EndpointSaveArgs(endpoint_id, 0, fields, app)
    await scripts.run("endpoint_save", args.keys(), args.argv())
    events = EventStore(client, scripts)
    event_id = new_id("msg", NOW)
    accepted = await events.accept(
        event_id=event_id, event_type=ONE, body="{}", key_id="key_1", now_ms=NOW, budget=3,
        grace_ms=1000, idempotency=None, wakeup=None, backlog_max=1_000_000, app_id=app,
        channels=("eu", "invoices"),
    )  # fmt: skip
    (first,) = accepted.delivery_ids
    (held,) = await log.reader.deliveries([first])
    assert held.application == app  # from the event's hash: not shipped yet

    log.ship()
    (summary,) = (await log.reader.list_events(EventFilter(application=app), 10, None)).items
    assert (summary.id, summary.application, summary.channels) == (
        event_id, app, ("eu", "invoices"),
    )  # fmt: skip
    replayed = await events.replay(event_id, None, NOW + 10, 3, 1000, sender=None)
    (again,) = replayed.delivery_ids
    log.ship()
    listed = await _walk_deliveries(log.reader, DeliveryFilter(application=app), 10)
    assert [(r.id, r.application) for r in listed] == [(again, app), (first, app)]
    assert await _walk_deliveries(log.reader, DeliveryFilter(application=A), 10) == []


@dataclass
class Tenants:
    """Three applications' worth of history: A with two endpoints, B with one, and the
    operational events (no application) to the operations endpoint."""

    events: list[Sent]
    endpoints: dict[str | None, list[str]]
    endpoint_of: dict[str, str]  # delivery id -> its endpoint
    succeeded: set[str]  # the deliveries that did (the others are pending)


async def _tenants(client: Redis) -> Tenants:
    endpoints: dict[str | None, list[str]] = {
        A: _endpoints(2),
        B: _endpoints(1),
        None: _endpoints(1),
    }
    events: list[Sent] = []
    endpoint_of: dict[str, str] = {}
    succeeded: set[str] = set()
    for n in range(24):
        application = (A, B, None)[n % 3]
        event_type = OPS if application is None else (ONE, TWO)[n // 3 % 2]
        key_id = ("key_1", "key_2")[n // 2 % 2]
        targets = endpoints[application]
        sent = await _log_event(
            client, event_type, NOW + 10 * n, application, targets, key_id=key_id
        )
        events.append(sent)
        for d, ep in zip(sent.deliveries, targets, strict=True):
            endpoint_of[d] = ep
            if n % 4:
                await _log_success(client, d, NOW + 10 * n + 5)
                succeeded.add(d)
    return Tenants(events, endpoints, endpoint_of, succeeded)


async def test_the_application_filter_pages_events(log: LocalLog, client: Redis) -> None:
    tenants = await _tenants(client)
    log.ship()
    newest_first = sorted(tenants.events, key=lambda e: e.id, reverse=True)
    for query in [
        EventFilter(),
        EventFilter(application=A),
        EventFilter(application=B),
        EventFilter(application=A, event_type=ONE),
        EventFilter(application=A, key_id="key_2"),
        EventFilter(application=B, key_id="key_1", event_type=TWO),
        EventFilter(application=A, since_ms=NOW + 60, until_ms=NOW + 180),
        EventFilter(application=A, event_type=OPS),
    ]:
        expected = [
            e
            for e in newest_first
            if query.application in (None, e.application)
            and query.event_type in (None, e.type)
            and query.key_id in (None, e.key_id)
            and (query.since_ms is None or e.at >= query.since_ms)
            and (query.until_ms is None or e.at <= query.until_ms)
        ]
        seen = [(e.id, e.application) for e in await _walk_events(log.reader, query)]
        assert seen == [(e.id, e.application) for e in expected], query


async def test_the_application_filter_pages_deliveries(log: LocalLog, client: Redis) -> None:
    tenants = await _tenants(client)
    log.ship()
    deliveries = sorted(
        ((d, e) for e in tenants.events for d in e.deliveries), key=lambda de: de[0], reverse=True
    )
    a_event, b_event = tenants.events[0], tenants.events[1]
    ep_a, ep_b = tenants.endpoints[A][0], tenants.endpoints[B][0]
    for query in [
        DeliveryFilter(),
        DeliveryFilter(application=A),
        DeliveryFilter(application=B),
        DeliveryFilter(application=A, status="succeeded"),
        DeliveryFilter(application=A, status="pending", event_type=TWO),
        DeliveryFilter(application=A, endpoint_id=ep_a),
        DeliveryFilter(application=A, endpoint_id=ep_b),  # another's endpoint: nothing
        DeliveryFilter(application=A, event_id=a_event.id),
        DeliveryFilter(application=A, event_id=b_event.id),
        DeliveryFilter(application=B, attempts_min=1),
        DeliveryFilter(application=A, since_ms=NOW + 60),
    ]:
        expected_ids = [
            d
            for d, e in deliveries
            if query.application in (None, e.application)
            and query.endpoint_id in (None, tenants.endpoint_of[d])
            and query.event_id in (None, e.id)
            and query.event_type in (None, e.type)
            and query.status in (None, "succeeded" if d in tenants.succeeded else "pending")
            and (query.attempts_min is None or d in tenants.succeeded)
            and (query.since_ms is None or e.at >= query.since_ms)
        ]
        event_of = dict(deliveries)
        for limit in (2, 50):
            seen = await _walk_deliveries(log.reader, query, limit)
            assert [r.id for r in seen] == expected_ids, (query, limit)
            assert [r.application for r in seen] == [event_of[r.id].application for r in seen]


def _snapshot(engine: sa.Engine) -> list[tuple[object, ...]]:
    with engine.connect() as conn:
        return [
            tuple(row)
            for table in (tables.events, tables.deliveries, tables.attempts)
            for row in conn.execute(sa.select(table).order_by(*table.primary_key.columns))
        ]


async def test_a_batch_written_again_changes_nothing(log_engine: sa.Engine) -> None:
    ep_1, ep_2 = _endpoints(2)
    event_id, ops_id = new_id("msg", NOW), new_id("msg", NOW + 1)
    first, second = delivery_id(event_id, ep_1), delivery_id(event_id, ep_2)
    replayed = f"dlv_{new_id('dlv', NOW + 50)[4:]}{ep_1.partition('_')[2]}"
    attempt = Attempt(1, NOW + 10, 5, 200, None, "ok", {}, {})
    batch: list[Record] = [
        EventLogged(
            next(_seq), event_id, ONE, NOW, "key_1", None, "{}",
            (NewDelivery(first, ep_1, "pending"), NewDelivery(second, ep_2, "pending")),
            application=A, channels=("eu", "invoices"),
        ),
        EventLogged(next(_seq), ops_id, OPS, NOW + 1, "system", None, "{}", ()),
        StateLogged(next(_seq), first, "succeeded", 1, NOW + 10, None, 200, None, "2xx", attempt),
        ReplayLogged(
            next(_seq), event_id, ONE, NOW + 50, (NewDelivery(replayed, ep_1, "pending"),), A
        ),
    ]  # fmt: skip
    with log_engine.begin() as conn:
        writer.write(conn, batch)
    once = _snapshot(log_engine)
    _e, _d = tables.events, tables.deliveries
    with log_engine.connect() as conn:
        events = conn.execute(sa.select(_e.c.id, _e.c.application, _e.c.channels)).all()
        # No channels is SQL NULL, not the JSON text 'null'.
        no_channels = conn.execute(sa.select(_e.c.id).where(_e.c.channels.is_(None))).all()
        made = conn.execute(sa.select(_d.c.id, _d.c.application)).all()
    assert sorted(events) == [(event_id, A, ["eu", "invoices"]), (ops_id, None, None)]
    assert no_channels == [(ops_id,)]
    assert sorted(made) == sorted((d, A) for d in (first, second, replayed))
    # Again whole, then its first record alone: rows are inserted once.
    for again in (batch, batch[:1]):
        with log_engine.begin() as conn:
            writer.write(conn, again)
        assert _snapshot(log_engine) == once
