"""The history's SQL: which index each list walks, what it leaves to the reader, and that
SQLite walks it in id order (no sort of the matches, whatever the history's size)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.support.stack import settings_of
from webhook_service.history import queries
from webhook_service.history.database import sync_engine, upgrade
from webhook_service.history.filters import DeliveryFilter, EventFilter
from webhook_service.ids import id_bound
from webhook_service.store.deliveries import DeliveryRecord

EP, EV = "ep_01JDZ00000000000000000000", "msg_01JDZ00000000000000000000"
APP = "app_01JDZ00000000000000000000"

# (filter, the index it walks, whether that index answers every filter)
SCANS = [
    (DeliveryFilter(), "deliveries_pkey", True),
    (DeliveryFilter(since_ms=1, until_ms=2), "deliveries_pkey", True),
    (DeliveryFilter(event_id=EV, status="failed"), "deliveries_by_event", False),
    (DeliveryFilter(endpoint_id=EP, status="failed"), "deliveries_by_endpoint_status", True),
    (
        DeliveryFilter(endpoint_id=EP, status="failed", status_class="5xx"),
        "deliveries_by_endpoint_status",
        False,
    ),
    (DeliveryFilter(endpoint_id=EP, status_class="5xx"), "deliveries_by_endpoint_class", True),
    (DeliveryFilter(endpoint_id=EP), "deliveries_by_endpoint", True),
    (DeliveryFilter(endpoint_id=EP, event_type="a.b"), "deliveries_by_endpoint", False),
    (DeliveryFilter(event_type="a.b", status="failed"), "deliveries_by_type", False),
    (DeliveryFilter(status="pending"), "deliveries_by_status", True),
    (DeliveryFilter(status_class="timeout"), "deliveries_by_class", True),
    (DeliveryFilter(attempts_min=3, attempts_max=3), "deliveries_by_attempts", True),
    # A range of counts is never walked: read in id order, filtered by the reader.
    (DeliveryFilter(attempts_min=3), "deliveries_pkey", False),
    (DeliveryFilter(attempts_min=2, attempts_max=4), "deliveries_pkey", False),
    (DeliveryFilter(status="failed", attempts_max=1), "deliveries_by_status", False),
    (DeliveryFilter(application=APP), "deliveries_by_application", True),
    # An event and an endpoint are one application's: the filter keeps every row or none.
    (DeliveryFilter(application=APP, event_id=EV), "deliveries_by_event", True),
    (DeliveryFilter(application=APP, endpoint_id=EP), "deliveries_by_endpoint", True),
    (
        DeliveryFilter(application=APP, endpoint_id=EP, status="failed"),
        "deliveries_by_endpoint_status",
        True,
    ),
    (
        DeliveryFilter(application=APP, endpoint_id=EP, event_type="a.b"),
        "deliveries_by_endpoint",
        False,
    ),
    # Before the filters every application's rows share: one application's page reads its
    # own rows alone.
    (DeliveryFilter(application=APP, event_type="a.b"), "deliveries_by_application", False),
    (DeliveryFilter(application=APP, status="failed"), "deliveries_by_application", False),
    (DeliveryFilter(application=APP, attempts_min=2), "deliveries_by_application", False),
]


@pytest.mark.parametrize(("query", "index", "exact"), SCANS)
def test_each_filter_walks_one_index(query: DeliveryFilter, index: str, exact: bool) -> None:
    scan = queries.delivery_scan(query)
    assert (scan.index, scan.exact) == (index, exact)


def test_the_walk_asks_for_the_index_columns_in_order() -> None:
    scan = queries.delivery_scan(DeliveryFilter(status="failed", endpoint_id=EP, event_type="x"))
    assert scan.equal == (("endpoint_id", EP), ("status", "failed"))
    scan = queries.delivery_scan(DeliveryFilter(attempts_min=0, attempts_max=0))
    assert scan.equal == (("attempts", 0),)
    scan = queries.delivery_scan(DeliveryFilter(application=APP, status="failed"))
    assert scan.equal == (("application", APP),)
    # Walking the endpoint's index, the application is the reader's to check.
    scan = queries.delivery_scan(DeliveryFilter(application=APP, endpoint_id=EP))
    assert scan.equal == (("endpoint_id", EP),)


def test_the_application_is_in_the_query_only_when_its_index_walks() -> None:
    query = DeliveryFilter(application=APP, status="failed")
    where = _where(queries.deliveries_page(query, queries.delivery_scan(query), None, 10))
    assert f"deliveries.application = '{APP}'" in where and "status" not in where
    query = DeliveryFilter(application=APP, endpoint_id=EP)
    where = _where(queries.deliveries_page(query, queries.delivery_scan(query), None, 10))
    assert "application" not in where
    events = _where(queries.events_page(EventFilter(application=APP), None, 10))
    assert f"events.application = '{APP}'" in events


def _where(statement: queries.Rows) -> str:
    compiled = statement.compile(compile_kwargs={"literal_binds": True})
    return str(compiled).split("WHERE", 1)[1].split("ORDER BY")[0]


def test_a_time_range_is_an_id_range_and_a_created_range() -> None:
    query = DeliveryFilter(since_ms=1000, until_ms=2000)
    where = _where(queries.deliveries_page(query, queries.delivery_scan(query), "dlv_X", 10))
    assert f"deliveries.id >= '{id_bound('dlv', 1000, upper=False)}'" in where
    # A delivery id runs on past its event's: "~" sorts after every character of an id.
    assert f"deliveries.id <= '{id_bound('dlv', 2000, upper=True)}~'" in where
    assert "deliveries.created_ms >= 1000" in where and "deliveries.created_ms <= 2000" in where
    assert "deliveries.id < 'dlv_X'" in where
    events = _where(queries.events_page(EventFilter(since_ms=1000), None, 10))
    assert f"events.id >= '{id_bound('msg', 1000, upper=False)}'" in events


@pytest.mark.parametrize(
    ("query", "index"),
    [
        (EventFilter(), "events_pkey"),
        (EventFilter(event_type="a.b"), "events_by_type"),
        (EventFilter(key_id="key_1"), "events_by_key"),
        (EventFilter(key_id="key_1", event_type="a.b"), "events_by_key_type"),
        (EventFilter(application=APP), "events_by_application"),
        (EventFilter(application=APP, event_type="a.b"), "events_by_application_type"),
        (EventFilter(application=APP, key_id="key_1"), "events_by_application_key"),
        (
            EventFilter(application=APP, key_id="key_1", event_type="a.b"),
            "events_by_application_key_type",
        ),
    ],
)
def test_every_event_filter_combination_has_its_index(query: EventFilter, index: str) -> None:
    assert queries.event_index(query) == index


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sa.Engine]:
    """The migrations' schema, empty: SQLite plans without statistics (the log never
    gathers any), so its plans do not depend on how many rows there are."""
    directory: Path = tmp_path_factory.mktemp("log")
    engine = sync_engine(settings_of({"WEBHOOK_DATA_DIR": str(directory)}))
    upgrade(engine)
    yield engine
    engine.dispose()


def _plan(engine: sa.Engine, statement: queries.Rows) -> list[str]:
    sql = str(statement.compile(engine, compile_kwargs={"literal_binds": True}))
    with engine.connect() as conn:
        return [row[3] for row in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql)]


def _sqlite_index(index: str) -> str:
    return {"deliveries_pkey": "sqlite_autoindex_deliveries_1"}.get(
        index, {"events_pkey": "sqlite_autoindex_events_1"}.get(index, index)
    )


@pytest.mark.parametrize(("query", "index", "exact"), SCANS)
@pytest.mark.parametrize("cursor", [None, "dlv_01JDZ5"])
def test_sqlite_walks_the_chosen_index_in_id_order(
    log: sa.Engine, query: DeliveryFilter, index: str, exact: bool, cursor: str | None
) -> None:
    plan = _plan(log, queries.deliveries_page(query, queries.delivery_scan(query), cursor, 50))
    assert len(plan) == 1 and _sqlite_index(index) in plan[0], plan
    assert not any("TEMP B-TREE" in step for step in plan), plan


@pytest.mark.parametrize(
    "query",
    [
        EventFilter(),
        EventFilter(event_type="a.b", since_ms=1),
        EventFilter(key_id="k"),
        EventFilter(key_id="k", event_type="a.b", until_ms=9),
        EventFilter(application=APP),
        EventFilter(application=APP, event_type="a.b", since_ms=1),
        EventFilter(application=APP, key_id="k"),
        EventFilter(application=APP, key_id="k", event_type="a.b", until_ms=9),
    ],
)
def test_sqlite_pages_events_by_their_index_and_counts_deliveries_by_event(
    log: sa.Engine, query: EventFilter
) -> None:
    plan = _plan(log, queries.events_page(query, "msg_01JDZ5", 50))
    assert _sqlite_index(queries.event_index(query)) in plan[0], plan
    assert any("deliveries_by_event" in step for step in plan[1:]), plan
    assert not any("TEMP B-TREE" in step for step in plan), plan


def test_reads_by_id_use_the_keys(log: sa.Engine) -> None:
    (step,) = _plan(log, queries.deliveries_by_id(["dlv_1", "dlv_2"]))
    assert "sqlite_autoindex_deliveries_1" in step
    (step,) = _plan(log, queries.attempts_of("dlv_1"))
    assert "sqlite_autoindex_attempts_1" in step and "TEMP" not in step
    assert "deliveries_by_event" in _plan(log, queries.delivery_ids_of_event(EV))[0]


def test_a_delivery_row_is_a_record_by_position() -> None:
    # reader._delivery builds a record from a row by position: the same names, in order.
    names = [column.name for column in queries.DELIVERY_COLUMNS]
    assert names == [field.name for field in dataclasses.fields(DeliveryRecord)]
