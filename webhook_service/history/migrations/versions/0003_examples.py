"""Examples: an event sent to one endpoint as an example (POST …/send-example) says so.

``events.example`` is TRUE for such an event and NULL for every other (no row already there
is one). On PostgreSQL the column is added to the partitioned parent, which adds it to every
partition there is and to every one made later.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("events", sa.Column("example", sa.Boolean))


def downgrade() -> None:
    op.drop_column("events", "example")
