"""Finished work back from the log into Redis (lua/revive.lua): the typed half in Redis of
an admin's retry, a recovery, a replay or an expunge of something that has left Redis.
``history/revive.py`` reads the rows from the log."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import orjson

from webhook_service.store import keys
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
    deliveries to make pending (all of one bucket: ``revive`` splits a revival by bucket)."""

    now_ms: int
    grace_ms: int
    hot_ms: int
    events: Sequence[EventRow]
    deliveries: Sequence[DeliveryRow] = ()

    def keys(self) -> list[str]:
        ids = [e.id for e in self.events] + [d.id for d in self.deliveries]
        buckets = {keys.bucket_of(i) for i in ids}
        if len(buckets) != 1:
            raise ValueError(f"one revival, one bucket: these are of {sorted(buckets)}")
        return [keys.due(buckets.pop())]

    def argv(self) -> list[str | int | float]:
        return [
            self.now_ms,
            self.grace_ms,
            self.hot_ms,
            orjson.dumps([e.as_lua() for e in self.events]).decode(),
            orjson.dumps([d.as_lua() for d in self.deliveries]).decode(),
        ]


def by_bucket(revival: Revival) -> list[Revival]:
    """The revival split into one a bucket: an event and its deliveries are of one."""
    events: dict[int, list[EventRow]] = {}
    deliveries: dict[int, list[DeliveryRow]] = {}
    for e in revival.events:
        events.setdefault(keys.bucket_of(e.id), []).append(e)
    for d in revival.deliveries:
        deliveries.setdefault(keys.bucket_of(d.id), []).append(d)
    return [
        Revival(revival.now_ms, revival.grace_ms, revival.hot_ms, events.get(b, []),
                deliveries.get(b, []))
        for b in dict.fromkeys([*events, *deliveries])
    ]  # fmt: skip


async def revive(scripts: Scripts, revival: Revival) -> list[Revived]:
    """Per delivery, in order: OK (pending again) or PRESENT (Redis had it)."""
    answers: dict[str, Revived] = {}
    for part in by_bucket(revival):
        reply = await scripts.run("revive", part.keys(), part.argv())
        answers.update((d.id, Revived(r)) for d, r in zip(part.deliveries, reply, strict=True))
    return [answers[d.id] for d in revival.deliveries]
