"""Ingest checks an event's ``data`` against its catalog type's schema, where it has one.

``WEBHOOK_VALIDATE_EVENTS``: ``off``; ``warn`` (the default: the event is stored all the
same, ``webhook_schema_violations_total{event_type}`` counts it on /metrics and a log line
names the first failing field, one line a type a minute, with how many were left out);
``enforce`` (a 422 whose errors point at each failing field, nothing stored). Only ingest
checks: a replay sends an event already accepted, as it was.

Each API process keeps the catalog's schemas compiled (``SchemaCache``). Ingest must not
pay a round trip for them: the catalog's version counter (store/event_types.py) is read at
most once a ``REFRESH_SECONDS``, never per event, and the schemas are read and compiled
again only when it moved. So a catalog change reaches every process's ingest within about
a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable, Iterable
from typing import Any

import redis.exceptions
from aiohttp import web

from webhook_service.api.context import services
from webhook_service.api.problems import ProblemError
from webhook_service.event_schemas import CompiledSchema, SchemaProblem, compile_schema
from webhook_service.log_window import LineWindow
from webhook_service.store.event_types import EventTypeRecord, EventTypeStore
from webhook_service.store.telemetry import count_schema_violation

log = logging.getLogger(__name__)

REFRESH_SECONDS = 1.0
_lines = LineWindow()


def compiled_catalog(records: Iterable[EventTypeRecord]) -> dict[str, CompiledSchema]:
    """The schemas ingest checks: of every type not archived that has one."""
    compiled: dict[str, CompiledSchema] = {}
    for record in records:
        if record.schema is None or record.archived:
            continue
        try:
            compiled[record.name] = compile_schema(record.schema)
        except SchemaProblem as exc:
            # Checked when it was written; a library upgrade could still refuse it.
            log.warning("the schema of event type %s does not compile: %s", record.name, exc)
    return compiled


class SchemaCache:
    def __init__(
        self,
        store: EventTypeStore,
        every: float = REFRESH_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._every = every
        self._clock = clock
        self._compiled: dict[str, CompiledSchema] = {}
        self._version: int | None = None
        self._checked = -math.inf
        self._lock = asyncio.Lock()

    async def schema_of(self, event_type: str) -> CompiledSchema | None:
        if self._clock() - self._checked >= self._every:
            await self._refresh()
        return self._compiled.get(event_type)

    async def _refresh(self) -> None:
        async with self._lock:
            if self._clock() - self._checked < self._every:
                return  # refreshed by the caller this one waited for
            version = await self._store.version()
            if version != self._version:
                # A write landing between the two reads leaves the version older than the
                # records: the next look reloads them once more, never the other way round.
                self._compiled = compiled_catalog(await self._store.every())
                self._version = version
            self._checked = self._clock()


SCHEMAS = web.AppKey("event_schemas", SchemaCache)


def setup(app: web.Application, store: EventTypeStore) -> None:
    app[SCHEMAS] = SchemaCache(store)


async def check_event(request: web.Request, event_id: str, event_type: str, data: Any) -> None:
    """Per WEBHOOK_VALIDATE_EVENTS: nothing, or a 422 (enforce), or the count and the log
    line of a violation (warn), the event going on to be stored."""
    svc = services(request)
    mode = svc.settings.validate_events
    if mode == "off":
        return
    compiled = await request.app[SCHEMAS].schema_of(event_type)
    found = [] if compiled is None else compiled.violations(data)
    if not found:
        return
    errors = [{"pointer": "/data" + v.pointer, "detail": v.message} for v in found]
    if mode == "enforce":
        raise ProblemError(
            422,
            f"The event's data does not match the schema of the event type {event_type}; "
            "nothing was stored.",
            kind="schema-violation",
            errors=errors,
        )
    # A metric must never turn an accepted event into a 503: the store is asked next anyway.
    with contextlib.suppress(redis.exceptions.RedisError):
        await count_schema_violation(svc.redis, event_type)
    left_out = _lines.admit(event_type)
    if left_out is not None:
        more = f"; {left_out} more of this type since the last such line" if left_out else ""
        log.warning(
            "event data does not match its type's schema (kept: WEBHOOK_VALIDATE_EVENTS=warn): "
            "event_type=%s pointer=%s message=%s%s",
            event_type, errors[0]["pointer"], errors[0]["detail"], more,
            extra={"event_id": event_id},
        )  # fmt: skip
