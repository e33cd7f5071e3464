"""The delivery log: events, deliveries, attempts.

On PostgreSQL each is partitioned by range of ``created_ms``, a partition per UTC day
(``history/partitions.py`` makes the days; retention drops them whole), with a DEFAULT
partition for any row no day takes. Indexes are declared on the parent; PostgreSQL makes
them on every partition. Elsewhere (SQLite) they are plain tables.

Revision ID: 0001
Revises:
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

from webhook_service.history.partitions import PARTITIONED, default_partition

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


# PostgreSQL's partitioning of each table (other dialects ignore the option).
_BY_DAY = "RANGE (created_ms)"
# Ids compare byte by byte, as they sort by time: pages go by id ranges and cursors. SQLite
# compares text so by default; PostgreSQL by the database's locale (en_US puts '_' and
# digits elsewhere) unless the column says "C".
_ID = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")


def upgrade() -> None:
    op.create_table(
        "events",
        sa.Column("id", _ID, nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("type", sa.Text, nullable=False),
        sa.Column("key_id", sa.Text, nullable=False),
        sa.Column("idempotency_key", sa.Text),
        sa.Column("body", sa.Text),
        sa.Column("expunged_ms", sa.BigInteger),
        sa.PrimaryKeyConstraint("id", "created_ms"),
        postgresql_partition_by=_BY_DAY,
    )
    op.create_index("events_by_type", "events", ["type", "id"])
    op.create_index("events_by_key", "events", ["key_id", "id"])
    # Both filters at once: every combination of the event filters has its index.
    op.create_index("events_by_key_type", "events", ["key_id", "type", "id"])
    op.create_table(
        "deliveries",
        sa.Column("id", _ID, nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("event_id", _ID, nullable=False),
        sa.Column("endpoint_id", _ID, nullable=False),
        sa.Column("event_type", sa.Text, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("updated_ms", sa.BigInteger, nullable=False),
        sa.Column("next_at_ms", sa.BigInteger),
        sa.Column("last_code", sa.Integer),
        sa.Column("last_error", sa.Text),
        sa.Column("last_class", sa.Text),
        sa.Column("log_seq", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("id", "created_ms"),
        postgresql_partition_by=_BY_DAY,
    )
    # One per filter the history offers, and the pairs asked most, newest first by id within
    # it (history/queries.py picks the one a list walks).
    for name, columns in (
        ("deliveries_by_event", ["event_id", "id"]),
        ("deliveries_by_endpoint", ["endpoint_id", "id"]),
        ("deliveries_by_endpoint_status", ["endpoint_id", "status", "id"]),
        ("deliveries_by_endpoint_class", ["endpoint_id", "last_class", "id"]),
        ("deliveries_by_status", ["status", "id"]),
        ("deliveries_by_type", ["event_type", "id"]),
        ("deliveries_by_class", ["last_class", "id"]),
        ("deliveries_by_attempts", ["attempts", "id"]),
    ):
        op.create_index(name, "deliveries", columns)
    op.create_table(
        "attempts",
        sa.Column("delivery_id", _ID, nullable=False),
        sa.Column("number", sa.Integer, nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("duration_ms", sa.Integer, nullable=False),
        sa.Column("status_code", sa.Integer),
        sa.Column("error", sa.Text),
        sa.Column("response_body", sa.Text, nullable=False),
        sa.Column("request_headers", sa.JSON, nullable=False),
        sa.Column("response_headers", sa.JSON, nullable=False),
        sa.PrimaryKeyConstraint("delivery_id", "number", "created_ms"),
        postgresql_partition_by=_BY_DAY,
    )
    if op.get_context().dialect.name == "postgresql":
        for table in PARTITIONED:
            op.execute(f'CREATE TABLE "{default_partition(table)}" PARTITION OF "{table}" DEFAULT')
