"""The compiled-schema cache of an API process: refreshed only when the catalog's version
moved, and that looked at no more than once a REFRESH_SECONDS, whatever the ingest rate."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from webhook_service.api.validation import SchemaCache, compiled_catalog
from webhook_service.store.event_types import EventTypeRecord

SCHEMA: dict[str, Any] = {"type": "object", "required": ["id"]}


def record(
    name: str, schema: dict[str, Any] | None = SCHEMA, archived: bool = False
) -> EventTypeRecord:
    return EventTypeRecord(name, "", schema, (), None, False, archived, 1, 1)


@dataclass
class FakeStore:
    records: list[EventTypeRecord]
    current: int = 1
    versions_read: int = 0
    loads: int = 0

    async def version(self) -> int:
        self.versions_read += 1
        return self.current

    async def every(self) -> list[EventTypeRecord]:
        self.loads += 1
        return list(self.records)


@dataclass
class Clock:
    now: float = 100.0
    calls: list[float] = field(default_factory=list)

    def __call__(self) -> float:
        return self.now


async def test_the_version_is_read_once_a_second_and_schemas_loaded_when_it_moved() -> None:
    store, clock = FakeStore([record("a.b")]), Clock()
    cache = SchemaCache(store, every=1.0, clock=clock)  # type: ignore[arg-type]
    for _ in range(100):
        assert await cache.schema_of("a.b") is not None
    assert (store.versions_read, store.loads) == (1, 1)

    store.records, store.current = [record("a.b", schema=None)], 2
    clock.now += 0.5
    assert await cache.schema_of("a.b") is not None  # not looked at yet
    clock.now += 0.5
    assert await cache.schema_of("a.b") is None
    assert (store.versions_read, store.loads) == (2, 2)

    clock.now += 5
    assert await cache.schema_of("a.b") is None
    assert (store.versions_read, store.loads) == (3, 2)  # version unchanged: no reload


async def test_a_failed_look_is_tried_again_at_the_next_event() -> None:
    store, clock = FakeStore([record("a.b")]), Clock()
    cache = SchemaCache(store, every=1.0, clock=clock)  # type: ignore[arg-type]

    async def refused() -> int:
        raise ConnectionError("store away")

    store.version = refused  # type: ignore[method-assign]
    for _ in range(2):
        try:
            await cache.schema_of("a.b")
        except ConnectionError:
            pass
        else:
            raise AssertionError("the store's refusal must reach ingest")
    del store.version
    assert await cache.schema_of("a.b") is not None


def test_only_unarchived_types_with_a_compiling_schema_are_kept() -> None:
    compiled = compiled_catalog(
        [
            record("with"),
            record("without", schema=None),
            record("archived", archived=True),
            record("broken", schema={"type": "bogus"}),
        ]
    )
    assert set(compiled) == {"with"}
