"""The log's schema on PostgreSQL: ids compare byte by byte ("C"), whatever the database's
locale, because pages go by id ranges and cursors and ids sort by time only so."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tests.support.postgres import Postgres
from tests.support.stack import settings_of
from webhook_service.history.database import sync_engine, upgrade

pytestmark = pytest.mark.integration


def test_every_id_column_collates_bytewise_on_postgresql(postgres: Postgres) -> None:
    url = postgres.create_database()
    engine = sync_engine(settings_of({"WEBHOOK_LOG_URL": url}))
    try:
        upgrade(engine)
        with engine.connect() as conn:
            found: dict[str, str | None] = dict(
                conn.execute(
                    sa.text(
                        "SELECT table_name || '.' || column_name, collation_name"
                        " FROM information_schema.columns"
                        " WHERE table_schema = 'public' AND column_name LIKE '%id'"
                        " AND data_type = 'text' AND table_name IN"
                        " ('events', 'deliveries', 'attempts')"
                    )
                ).all()
            )
    finally:
        engine.dispose()
    ids = {"events.id", "deliveries.id", "deliveries.event_id", "deliveries.endpoint_id",
           "attempts.delivery_id"}  # fmt: skip
    assert {column: found.get(column) for column in ids} == dict.fromkeys(ids, "C")
