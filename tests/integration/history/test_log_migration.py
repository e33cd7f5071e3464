"""The log's history from before applications, on SQLite and on PostgreSQL: migration 0002
on a log made at 0001 with rows in it gives each row the default application (none for an
operational event's), with the new indexes on every day partition, DEFAULT and the days
made later; and schema 2's history moved into the log (``backfill.move``) gets the same."""

from __future__ import annotations

from collections.abc import Iterator
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest
import redis
import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from redis.asyncio import Redis

from tests.support.postgres import log_env
from tests.support.stack import settings_of
from webhook_service.history import backfill, partitions, queries, tables
from webhook_service.history.database import async_engine, revisions, sync_engine, upgrade
from webhook_service.history.filters import DeliveryFilter, EventFilter
from webhook_service.history.reader import HistoryReader
from webhook_service.ids import delivery_id, new_id
from webhook_service.store import keys
from webhook_service.store.applications import DEFAULT_APP_ID
from webhook_service.store.deliveries import Attempt, DeliveryStore
from webhook_service.store.events import EventStore
from webhook_service.store.scripts import Scripts
from webhook_service.timeutil import now_ms

pytestmark = [pytest.mark.integration, pytest.mark.both_logs]

DAY = partitions.DAY_MS
SENT, OPS = "old.sent", "delivery.exhausted"
# Each new index, its table and its columns (migrations/versions/0002_applications.py).
INDEXES = {
    "events_by_application": ("events", "application, id"),
    "events_by_application_type": ("events", "application, type, id"),
    "events_by_application_key": ("events", "application, key_id, id"),
    "events_by_application_key_type": ("events", "application, key_id, type, id"),
    "deliveries_by_application": ("deliveries", "application, id"),
}


def _upgrade_to(engine: sa.Engine, revision: str) -> None:
    config = Config()
    config.set_main_option("script_location", str(files("webhook_service.history") / "migrations"))
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, revision)


@pytest.fixture
def env(tmp_path: Path, request: pytest.FixtureRequest, log_backend: str) -> dict[str, str]:
    return {"WEBHOOK_DATA_DIR": str(tmp_path), **log_env(request, log_backend)}


@pytest.fixture
def old_log(env: dict[str, str]) -> Iterator[sa.Engine]:
    """A log at revision 0001, as the release before applications left it."""
    engine = sync_engine(settings_of(env))
    _upgrade_to(engine, "0001")
    yield engine
    engine.dispose()


def _rows_of_0001(at: int, event_type: str, endpoint_id: str) -> tuple[str, str, list[Any]]:
    """An event and its delivery, tried once, as 0001's columns hold them."""
    event_id = new_id("msg", at)
    dlv = delivery_id(event_id, endpoint_id)
    event = {
        "id": event_id, "created_ms": at, "type": event_type, "key_id": "key_1",
        "idempotency_key": None, "body": "{}", "expunged_ms": None,
    }  # fmt: skip
    delivery = {
        "id": dlv, "created_ms": at, "event_id": event_id, "endpoint_id": endpoint_id,
        "event_type": event_type, "status": "succeeded", "attempts": 1, "updated_ms": at + 5,
        "next_at_ms": None, "last_code": 200, "last_error": None, "last_class": "2xx",
        "log_seq": 1,
    }  # fmt: skip
    attempt = {
        "delivery_id": dlv, "number": 1, "created_ms": at + 1, "duration_ms": 4,
        "status_code": 200, "error": None, "response_body": "ok", "request_headers": {},
        "response_headers": {},
    }  # fmt: skip
    return event_id, dlv, [event, delivery, attempt]


def _partition_indexes(conn: sa.Connection, table: str) -> dict[str, set[str]]:
    """Each partition of ``table`` -> the column lists of its indexes."""
    found: dict[str, set[str]] = {}
    for partition, definition in conn.execute(
        sa.text(
            "SELECT c.relname, pg_get_indexdef(x.indexrelid) FROM pg_inherits i"
            " JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_index x ON x.indrelid = c.oid"
            " WHERE i.inhparent = to_regclass(:table)"
        ),
        {"table": table},
    ):
        found.setdefault(partition, set()).add(definition.rpartition("(")[2].rstrip(")"))
    return found


async def test_0002_gives_the_rows_already_there_to_the_default_application(
    old_log: sa.Engine, env: dict[str, str], client: Redis
) -> None:
    now = now_ms()
    postgres = old_log.dialect.name == "postgresql"
    with old_log.begin() as conn:
        # Two days of their own on PostgreSQL; 40 days ago in DEFAULT.
        partitions.ensure(conn, now, since_ms=now - 2 * DAY)
    endpoint_id = new_id("ep", now)
    expected: dict[str, str | None] = {}  # event or delivery id -> its application
    rows: list[list[Any]] = [[], [], []]
    for n, at in enumerate((now - 40 * DAY, now - 2 * DAY, now)):
        for event_type in (SENT, OPS):
            event_id, dlv, made = _rows_of_0001(at + n, event_type, endpoint_id)
            expected[event_id] = expected[dlv] = None if event_type == OPS else DEFAULT_APP_ID
            for into, row in zip(rows, made, strict=True):
                into.append(row)
    with old_log.begin() as conn:
        for table, table_rows in zip(
            (tables.events, tables.deliveries, tables.attempts), rows, strict=True
        ):
            conn.execute(sa.insert(table), table_rows)

    upgrade(old_log)

    assert revisions(old_log) == {"0004"}
    _e, _d = tables.events, tables.deliveries
    with old_log.connect() as conn:
        events = conn.execute(sa.select(_e.c.id, _e.c.application, _e.c.channels)).all()
        deliveries = conn.execute(sa.select(_d.c.id, _d.c.application, _d.c.status)).all()
    assert {r.id: r.application for r in [*events, *deliveries]} == expected
    assert {r.channels for r in events} == {None}
    assert {r.status for r in deliveries} == {"succeeded"}  # nothing else touched

    if postgres:
        with old_log.begin() as conn:
            # Days made after the upgrade get the indexes too.
            assert partitions.ensure(conn, now + 10 * DAY) > 0
            for name in ("events", "deliveries"):
                wanted = {cols for t, cols in INDEXES.values() if t == name}
                found = _partition_indexes(conn, name)
                assert partitions.default_partition(name) in found
                assert partitions.day_partition(name, partitions.day_of(now + 10 * DAY)) in found
                assert {p: wanted & cols for p, cols in found.items()} == dict.fromkeys(
                    found, wanted
                )
            collations = conn.execute(
                sa.text(
                    "SELECT table_name, collation_name FROM information_schema.columns"
                    " WHERE table_schema = 'public' AND column_name = 'application'"
                    " AND table_name IN ('events', 'deliveries')"
                )
            ).all()
            assert sorted(collations) == [("deliveries", "C"), ("events", "C")]
            # A page of one application's walks its index, in every partition.
            conn.execute(sa.text("SET LOCAL enable_seqscan = off"))
            query = DeliveryFilter(application=DEFAULT_APP_ID)
            page = queries.deliveries_page(query, queries.delivery_scan(query), None, 10)
            sql = str(page.compile(old_log, compile_kwargs={"literal_binds": True}))
            plan = [row[0] for row in conn.exec_driver_sql("EXPLAIN " + sql)]
            scans = [line for line in plan if "Scan" in line and "deliveries" in line]
            assert scans and all("application_id_idx" in line for line in scans), plan
    else:
        names = {
            index["name"]
            for table in ("events", "deliveries")
            for index in sa.inspect(old_log).get_indexes(table)
        }
        assert names >= set(INDEXES)

    # Read back through the reader, by the application filter.
    settings = settings_of(env)
    reading = async_engine(settings)
    scripts = Scripts(client)
    reader = HistoryReader(
        reading, DeliveryStore(client, scripts), EventStore(client, scripts), settings.log_timeout
    )
    try:
        mine = sorted((i for i, a in expected.items() if a is not None), reverse=True)
        listed = await reader.list_events(EventFilter(application=DEFAULT_APP_ID), 10, None)
        assert [e.id for e in listed.items] == [i for i in mine if i.startswith("msg_")]
        shown = await reader.list_deliveries(DeliveryFilter(application=DEFAULT_APP_ID), 10, None)
        assert [d.id for d in shown.items] == [i for i in mine if i.startswith("dlv_")]
    finally:
        await reading.dispose()


async def test_schema_2_history_is_the_default_application_s(
    client: Redis, sync_redis: redis.Redis, log_engine: sa.Engine
) -> None:
    at = 1_800_000_000_000
    endpoint_id = new_id("ep", at)
    expected: dict[str, str | None] = {}
    for event_type in (SENT, OPS):
        event_id = new_id("msg", at)
        dlv = delivery_id(event_id, endpoint_id)
        # As schema 2 kept them (keys.py, "Schema 2"): every event listed, its deliveries
        # named in dlvs, each attempt in the delivery's hash.
        sync_redis.zadd(keys.SCHEMA2_EVENTS, {event_id: 0})
        sync_redis.hset(
            keys.event(event_id),
            mapping={"type": event_type, "key": "key_1", "body": "{}", "dlvs": dlv},
        )
        attempt = Attempt(1, at + 1, 4, 200, None, "ok", {}, {})
        sync_redis.hset(
            keys.delivery(dlv),
            mapping={
                "status": "succeeded", "attempts": 1, "updated": at + 5, "code": 200,
                "class": "2xx", "a1": attempt.to_json(),
            },
        )  # fmt: skip
        expected[event_id] = expected[dlv] = None if event_type == OPS else DEFAULT_APP_ID

    moved = backfill.move(sync_redis, log_engine)

    assert (moved.events, moved.deliveries, moved.attempts) == (2, 2, 2)
    _e, _d = tables.events, tables.deliveries
    with log_engine.connect() as conn:
        rows = [
            *conn.execute(sa.select(_e.c.id, _e.c.application)),
            *conn.execute(sa.select(_d.c.id, _d.c.application)),
        ]
    assert dict(rows) == expected
    assert not await client.exists(*(keys.event(i) for i in expected if i.startswith("msg_")))
