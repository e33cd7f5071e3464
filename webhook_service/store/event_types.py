"""The event-type catalog: one hash a type, an index by name and a version counter, all
under the ``{types}`` tag (keys.py): global, small (``MAX_EVENT_TYPES``) and read often.

Every write is one MULTI/EXEC under WATCH of the type's hash: it reads the record, decides
in Python, and writes the whole record, the index and ``INCR`` of the version together, or
starts again when another writer changed the type meanwhile. The version lets each API
process keep its compiled schemas and reload them only when it moved
(api/validation.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, cast

import orjson
from redis.asyncio import Redis
from redis.exceptions import WatchError
from redis.typing import EncodableT, FieldT

from webhook_service.store import keys

# Every API process holds the whole catalog's compiled schemas: a bound on that, and on a
# listing's filtering (it reads the index through).
MAX_EVENT_TYPES = 1000
# A write that keeps losing its race to others gives up after this many tries (each a
# round trip or three): only a storm of writers to one type could get there.
_TRIES = 20
# Names read per round trip while a filtered listing looks for a page's worth.
_CHUNK = 250


@dataclass(frozen=True)
class EventTypeRecord:
    name: str
    description: str
    # A JSON Schema (2020-12) for the events' ``data``; None: any object.
    schema: dict[str, Any] | None
    examples: tuple[dict[str, Any], ...]
    group: str | None
    deprecated: bool
    archived: bool
    created_ms: int
    updated_ms: int

    def same_content(self, other: EventTypeRecord) -> bool:
        """Equal but for the times: an upsert of the same content changes nothing."""
        return replace(self, created_ms=0, updated_ms=0) == replace(
            other, created_ms=0, updated_ms=0
        )

    def fields(self) -> dict[FieldT, EncodableT]:
        return {
            "description": self.description,
            "schema": "" if self.schema is None else orjson.dumps(self.schema).decode(),
            "examples": orjson.dumps(list(self.examples)).decode(),
            "group": self.group or "",
            "deprecated": "1" if self.deprecated else "0",
            "archived": "1" if self.archived else "0",
            "created": str(self.created_ms),
            "updated": str(self.updated_ms),
        }

    @classmethod
    def from_hash(cls, name: str, raw: dict[str, str]) -> EventTypeRecord:
        schema = raw.get("schema", "")
        return cls(
            name=name,
            description=raw.get("description", ""),
            schema=orjson.loads(schema) if schema else None,
            examples=tuple(orjson.loads(raw.get("examples") or "[]")),
            group=raw.get("group") or None,
            deprecated=raw.get("deprecated") == "1",
            archived=raw.get("archived") == "1",
            created_ms=int(raw["created"]),
            updated_ms=int(raw["updated"]),
        )


class WriteOutcome(StrEnum):
    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"
    # A create of a name the catalog has (archived or not), an update of one it has not.
    EXISTS = "exists"
    MISSING = "missing"
    FULL = "full"  # MAX_EVENT_TYPES already


# What a write makes of the record there (None: none yet): the record to keep, or an
# outcome that leaves the catalog as it is (EXISTS, MISSING).
Change = Callable[[EventTypeRecord | None], EventTypeRecord | WriteOutcome]


@dataclass(frozen=True)
class Written:
    outcome: WriteOutcome
    record: EventTypeRecord | None  # as kept (the one there for UNCHANGED, EXISTS)


class EventTypeStore:
    def __init__(self, redis: Redis) -> None:
        self._redis = redis

    async def get(self, name: str) -> EventTypeRecord | None:
        raw = cast(dict[str, str], await self._redis.hgetall(keys.event_type(name)))
        return EventTypeRecord.from_hash(name, raw) if raw else None

    async def version(self) -> int:
        return int(cast(str | None, await self._redis.get(keys.EVENT_TYPES_VERSION)) or 0)

    async def write(self, name: str, change: Change) -> Written:
        """Apply ``change`` to the type atomically (see the module's docstring)."""
        key = keys.event_type(name)
        for _ in range(_TRIES):
            async with self._redis.pipeline(transaction=True) as pipe:
                try:
                    await pipe.watch(key, keys.EVENT_TYPES)
                    raw = cast(dict[str, str], await pipe.hgetall(key))
                    before = EventTypeRecord.from_hash(name, raw) if raw else None
                    after = change(before)
                    if isinstance(after, WriteOutcome):
                        return Written(after, before)
                    if before is not None and before.same_content(after):
                        return Written(WriteOutcome.UNCHANGED, before)
                    if before is None and await pipe.zcard(keys.EVENT_TYPES) >= MAX_EVENT_TYPES:
                        return Written(WriteOutcome.FULL, None)
                    pipe.multi()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
                    pipe.hset(key, mapping=after.fields())
                    pipe.zadd(keys.EVENT_TYPES, {name: 0})
                    pipe.incr(keys.EVENT_TYPES_VERSION)
                    await pipe.execute()
                except WatchError:
                    continue
            outcome = WriteOutcome.CREATED if before is None else WriteOutcome.UPDATED
            return Written(outcome, after)
        raise RuntimeError(f"the event type {name!r} kept changing under {_TRIES} writes")

    async def page(
        self, limit: int, cursor: str | None, *, include_archived: bool, group: str | None
    ) -> tuple[list[EventTypeRecord], str | None]:
        """Up to ``limit`` types by name after ``cursor`` (the last name of the page before),
        and the next page's cursor."""
        found: list[EventTypeRecord] = []
        lower = f"({cursor}" if cursor else "-"
        while True:
            names = cast(
                list[str],
                await self._redis.zrangebylex(keys.EVENT_TYPES, lower, "+", start=0, num=_CHUNK),
            )
            records = await self._read(names)
            for record in records:
                if (include_archived or not record.archived) and group in (None, record.group):
                    found.append(record)
                    if len(found) > limit:
                        return found[:limit], found[limit - 1].name
            if len(names) < _CHUNK:
                return found, None
            lower = f"({names[-1]}"

    async def every(self) -> list[EventTypeRecord]:
        """The whole catalog, archived types too (at most MAX_EVENT_TYPES)."""
        names = cast(list[str], await self._redis.zrange(keys.EVENT_TYPES, 0, -1))
        return await self._read(names)

    async def _read(self, names: list[str]) -> list[EventTypeRecord]:
        async with self._redis.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.hgetall(keys.event_type(name))
            rows = cast(list[dict[str, str]], await pipe.execute())
        return [
            EventTypeRecord.from_hash(name, raw)
            for name, raw in zip(names, rows, strict=True)
            if raw
        ]
