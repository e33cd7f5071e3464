"""Scheduled delivery: an event keeps the deliver_at its producer gave it.

``events.deliver_at_ms`` is when its deliveries were due, NULL for an event sent at once
(every row already there). A delivery waiting for that time has status ``scheduled``, a
value of the text column ``deliveries.status`` that needs no change. On PostgreSQL the
column is added to the partitioned parent, which adds it to every partition.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("events", sa.Column("deliver_at_ms", sa.BigInteger))


def downgrade() -> None:
    op.drop_column("events", "deliver_at_ms")
