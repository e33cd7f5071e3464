"""Applications: each event's and delivery's application, and each event's channels.

``application`` is NULL for operational events and their deliveries (they belong to none);
the rows already there are given to the default application, or to none when operational
(``history/tenancy.py``). The indexes lead with the application, so that a list of one
application's rows walks that application's rows alone. On PostgreSQL the columns and the
indexes are added to the partitioned parents: PostgreSQL adds them to every partition there
is (day partitions and DEFAULT) and to every one made later (``partitions.ensure``).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

from webhook_service.history import tenancy

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

# An application id compares byte by byte, as 0001's ids do.
_APPLICATION = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")


def upgrade() -> None:
    op.add_column("events", sa.Column("application", _APPLICATION))
    op.add_column("events", sa.Column("channels", sa.JSON))
    op.add_column("deliveries", sa.Column("application", _APPLICATION))
    # Before the indexes: each is then built once over the rows as they end, rather than
    # kept up row by row through the update.
    tenancy.adopt(op.get_bind())
    # Every combination of the event filters keeps its index (history/queries.py
    # event_index); a list of deliveries walks the application's when no filter it
    # tries first is given (queries._DELIVERY_INDEXES).
    for name, table, columns in (
        ("events_by_application", "events", ["application", "id"]),
        ("events_by_application_type", "events", ["application", "type", "id"]),
        ("events_by_application_key", "events", ["application", "key_id", "id"]),
        ("events_by_application_key_type", "events", ["application", "key_id", "type", "id"]),
        ("deliveries_by_application", "deliveries", ["application", "id"]),
    ):
        op.create_index(name, table, columns)
