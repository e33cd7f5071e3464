"""The log's rows of one application given to another: ``webhook-service migrate
--application`` moves a single-tenant store into a named application, and its log with it.

By then the log's rows of that store are the default application's: migration 0002 gave
them to it as it added the column (``tenancy.adopt``), and the schema 2 -> 3 step wrote the
history it moved so (``backfill.py``); no process writes to the log of a store below schema
4. Operational rows belong to none (NULL) and stay so.

A batch at a time, each committed: a run cut short leaves some rows moved, the rest where
they were, and the next run moves the rest (what is left of ``source``), to the same end.
"""

from __future__ import annotations

import sqlalchemy as sa

from webhook_service.history import tables

# Each table with an application column (an attempt's is its delivery's).
_OWNED = (tables.events, tables.deliveries)


def reassign(engine: sa.Engine, source: str, target: str, batch: int = 1000) -> int:
    """Every event and delivery of ``source`` given to ``target``: how many rows."""
    moved = 0
    for table in _OWNED:
        ids = (
            sa.select(table.c.id)
            .where(table.c.application == source)
            .limit(batch)
            .scalar_subquery()
        )
        # The subquery walks the index that leads with the application (0002).
        statement = (
            sa.update(table)
            .where(table.c.application == source, table.c.id.in_(ids))
            .values(application=target)
        )
        while True:
            with engine.begin() as conn:
                count = conn.execute(statement).rowcount
            moved += count
            if count == 0:
                break
    return moved
