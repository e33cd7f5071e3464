"""The log's rows made before applications: a single-tenant release's events and deliveries
belong to the default application, but for operational events and their deliveries, which
belong to none (apps-design: only the operator sees them).

Migration 0002 gives them to it (``adopt``) as it adds the columns, and ``backfill.py``
writes schema 2's history so (``application_of``).
"""

from __future__ import annotations

import sqlalchemy as sa

from webhook_service.operations import OPERATIONAL_EVENT_TYPES
from webhook_service.store.applications import DEFAULT_APP_ID

# Each table and the column of its event's type, named alone rather than through
# tables.py: a migration must not change meaning when tables.py does later.
_TYPED = (
    (sa.table("events", sa.column("application"), sa.column("type")), "type"),
    (sa.table("deliveries", sa.column("application"), sa.column("event_type")), "event_type"),
)


def application_of(event_type: str) -> str | None:
    """The application of a single-tenant release's event of this type."""
    return None if event_type in OPERATIONAL_EVENT_TYPES else DEFAULT_APP_ID


def adopt(conn: sa.Connection) -> int:
    """Every event and delivery of no application whose type is not operational, given to
    the default application, in the caller's transaction: how many rows. Once the log holds
    applications only operational rows have none, so it may run again, to the same end."""
    adopted = 0
    for table, type_column in _TYPED:
        result = conn.execute(
            sa.update(table)
            .where(
                table.c.application.is_(None),
                table.c[type_column].not_in(OPERATIONAL_EVENT_TYPES),
            )
            .values(application=DEFAULT_APP_ID)
        )
        adopted += result.rowcount
    return adopted
