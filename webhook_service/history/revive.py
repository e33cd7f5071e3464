"""What has left Redis, brought back from the log: an admin's retry or a recovery of a
finished delivery, a replay or an expunge of an event that has left. The rows are read here;
``store/revive.py`` puts them back in Redis, where the usual scripts then act on them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from webhook_service.history import tables
from webhook_service.history.reader import HistoryReader
from webhook_service.store.deliveries import DeliveryStore, RetryOutcome
from webhook_service.store.revive import DeliveryRow, EventRow, Revival, Revived, revive
from webhook_service.store.scripts import Scripts

_d, _e = tables.deliveries, tables.events
_EVENT_COLUMNS = (
    _e.c.id, _e.c.type, _e.c.key_id, _e.c.body, _e.c.expunged_ms, _e.c.application,
    _e.c.channels,
)  # fmt: skip


def _event(row: Any) -> EventRow:
    """From a row holding _EVENT_COLUMNS (SQLAlchemy types a row's columns only positionally).
    Its application and channels go back with it: a replay fans out by them."""
    return EventRow(
        row.id, row.type, row.key_id, row.body, row.expunged_ms, row.application,
        tuple(row.channels or ()),
    )  # fmt: skip


class Reviver:
    """Reads through the history reader, so a log that is away is its LogUnavailable."""

    def __init__(self, reader: HistoryReader, scripts: Scripts, hot_ms: int) -> None:
        self._reader = reader
        self._scripts = scripts
        self._hot_ms = hot_ms

    async def retry(
        self, store: DeliveryStore, delivery_ids: Sequence[str], now_ms: int, grace_ms: int
    ) -> list[RetryOutcome]:
        """``DeliveryStore.retry``, for finished deliveries whether Redis still holds them
        or only the log does: per id, in order, MISSING only when the log lacks it too."""
        outcomes = (await store.retry(delivery_ids, now_ms, grace_ms)).outcomes
        gone = [
            d
            for d, outcome in zip(delivery_ids, outcomes, strict=True)
            if outcome is RetryOutcome.MISSING
        ]
        if not gone:
            return outcomes
        rows = await self._reader.rows(
            sa.select(_d.c.id.label("delivery_id"), _d.c.attempts, *_EVENT_COLUMNS)
            .join(_e, _e.c.id == _d.c.event_id)
            .where(_d.c.id.in_(gone))
        )
        found = {row.delivery_id: row for row in rows}
        events = {row.id: _event(row) for row in rows}
        # A row's `id` is its event's (_EVENT_COLUMNS); the delivery's is `delivery_id`.
        deliveries = [
            DeliveryRow(d, found[d].id, int(found[d].attempts)) for d in gone if d in found
        ]
        revived = await revive(
            self._scripts,
            Revival(now_ms, grace_ms, self._hot_ms, list(events.values()), deliveries),
        )
        # Revived, or brought back by a retry racing this one: pending either way.
        again = {
            row.id: (RetryOutcome.OK if r is Revived.OK else RetryOutcome.PENDING)
            for row, r in zip(deliveries, revived, strict=True)
        }
        return [again.get(d, outcome) for d, outcome in zip(delivery_ids, outcomes, strict=True)]

    async def restore_event(self, event_id: str, now_ms: int) -> bool:
        """The event back in Redis from the log, if the log has it (and Redis does not):
        for a replay or an expunge. It leaves again, after the hot window, unless a delivery
        of it is live by then."""
        rows = await self._reader.rows(sa.select(*_EVENT_COLUMNS).where(_e.c.id == event_id))
        if not rows:
            return False
        await revive(self._scripts, Revival(now_ms, 0, self._hot_ms, [_event(rows[0])]))
        return True
