"""The log's tables, as SQLAlchemy Core sees them (the migrations create them).

Times are UTC milliseconds since the epoch, as in Redis. ``created_ms`` is the time in the
row's id (ids sort by time) and part of every key: PostgreSQL partitions each table by day
on it, and a partitioned table's unique keys must hold the partition column.
"""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

events = sa.Table(
    "events",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("created_ms", sa.BigInteger, primary_key=True),
    sa.Column("type", sa.Text, nullable=False),
    sa.Column("key_id", sa.Text, nullable=False),
    sa.Column("idempotency_key", sa.Text),
    # The exact bytes we signed; NULL once expunged (expunged_ms says when).
    sa.Column("body", sa.Text),
    sa.Column("expunged_ms", sa.BigInteger),
    # NULL: an operational event, which belongs to no application.
    sa.Column("application", sa.Text),
    # NULL: none (none_as_null: None is stored as SQL NULL, not as the JSON text null).
    sa.Column("channels", sa.JSON(none_as_null=True)),
    # TRUE: an example sent to one endpoint (api/events.py send_example); NULL: not one.
    sa.Column("example", sa.Boolean),
    # When its deliveries were due (api/scheduling.py); NULL: at once, none was given.
    sa.Column("deliver_at_ms", sa.BigInteger),
)

deliveries = sa.Table(
    "deliveries",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("created_ms", sa.BigInteger, primary_key=True),
    sa.Column("event_id", sa.Text, nullable=False),
    sa.Column("endpoint_id", sa.Text, nullable=False),
    sa.Column("event_type", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("updated_ms", sa.BigInteger, nullable=False),
    sa.Column("next_at_ms", sa.BigInteger),
    sa.Column("last_code", sa.Integer),
    sa.Column("last_error", sa.Text),
    sa.Column("last_class", sa.Text),
    # records.stream_seq of the last outbox record written here: an older one never wins.
    sa.Column("log_seq", sa.BigInteger, nullable=False),
    sa.Column("application", sa.Text),  # its event's
)

attempts = sa.Table(
    "attempts",
    metadata,
    sa.Column("delivery_id", sa.Text, primary_key=True),
    sa.Column("number", sa.Integer, primary_key=True),
    sa.Column("created_ms", sa.BigInteger, primary_key=True),  # the attempt's start
    sa.Column("duration_ms", sa.Integer, nullable=False),
    sa.Column("status_code", sa.Integer),
    sa.Column("error", sa.Text),
    sa.Column("response_body", sa.Text, nullable=False),
    sa.Column("request_headers", sa.JSON, nullable=False),
    sa.Column("response_headers", sa.JSON, nullable=False),
)
