"""Finished work back from the log into Redis (lua/revive.lua): the typed half in Redis of
an admin's retry, a recovery, a replay or an expunge of something that has left Redis.
``history/revive.py`` reads the rows from the log."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import orjson

from webhook_service.store.scripts import Scripts


class Revived(StrEnum):
    """revive.lua's reply, per delivery."""

    OK = "ok"  # pending again
    PRESENT = "present"  # Redis had it: left as it is


@dataclass(frozen=True)
class EventRow:
    id: str
    type: str
    key_id: str
    body: str | None  # None once expunged
    expunged_ms: int | None
    application: str | None = None  # None: one of our operational events
    channels: tuple[str, ...] = ()

    def as_lua(self) -> dict[str, object]:
        row: dict[str, object] = {"id": self.id, "type": self.type, "key": self.key_id}
        if self.application is not None:
            row["app"] = self.application
        if self.channels:
            row["ch"] = orjson.dumps(list(self.channels)).decode()
        if self.body is not None:
            row["body"] = self.body
        if self.expunged_ms is not None:
            row["expunged"] = self.expunged_ms
        return row


@dataclass(frozen=True)
class DeliveryRow:
    id: str
    event_id: str
    attempts: int

    def as_lua(self) -> dict[str, object]:
        return {"id": self.id, "event": self.event_id, "attempts": self.attempts}


@dataclass(frozen=True)
class Revival:
    """revive.lua's arguments, in the order its head names them: the events to restore, the
    deliveries to make pending."""

    now_ms: int
    grace_ms: int
    hot_ms: int
    events: Sequence[EventRow]
    deliveries: Sequence[DeliveryRow] = ()

    def argv(self) -> list[str | int | float]:
        return [
            self.now_ms,
            self.grace_ms,
            self.hot_ms,
            orjson.dumps([e.as_lua() for e in self.events]).decode(),
            orjson.dumps([d.as_lua() for d in self.deliveries]).decode(),
        ]


async def revive(scripts: Scripts, revival: Revival) -> list[Revived]:
    """Per delivery, in order: OK (pending again) or PRESENT (Redis had it)."""
    return [Revived(r) for r in await scripts.run("revive", revival.argv())]
