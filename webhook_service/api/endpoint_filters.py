"""Payload filters at ingest: the API evaluates them, the ingest script leaves out the
endpoints whose filter the event does not pass.

Each API process keeps every application's filtered endpoints (their ids and parsed
filters) with the version of its filters they are of (``filter_v`` in the application's
hash, which endpoint_save.lua bumps in the step that changes a filter). Evaluating in Python
keeps ingest.lua a plain write step, and the writes one atomic step: the script is given
the version evaluated with and the ids of the filtered endpoints that did not pass.

Why no once-a-second poll of the version: ingest.lua reads the application's hash anyway,
so it compares the version the API evaluated with the current one at no cost, and answers
STALE, having written nothing, when they differ; the API reads the filters again and tries
once more. The check is thus in the very round trip that writes, a filter change takes
effect from the next event in every process, and steady ingest pays no read for filters
at all. A poll would still have needed that check (a change landing between the poll and
the write) and would add a round trip a second per application.

An endpoint deleted leaves the version as it is: its id may linger in a process's list, and
passing it as left out does nothing (the fan-out no longer has it)."""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from aiohttp import web

from webhook_service.api.problems import ProblemError
from webhook_service.filters import Filter, FilterEvent
from webhook_service.store.endpoints import EndpointStore

log = logging.getLogger(__name__)

# Applications whose filters a process keeps; the least recently ingested one goes first.
MAX_APPLICATIONS = 10_000


@dataclass(frozen=True)
class LoadedFilters:
    version: int
    filters: tuple[tuple[str, Filter], ...]  # (endpoint id, its filter)

    def refused(self, event: FilterEvent) -> tuple[str, ...]:
        """The filtered endpoints whose filter the event does not pass."""
        return tuple(endpoint_id for endpoint_id, f in self.filters if not f.matches(event))


def _parsed(endpoint_id: str, text: str) -> Filter | None:
    try:
        return Filter.loads(text)
    except ValueError as exc:  # FilterInvalid, or no JSON at all
        # Checked when it was written; an upgrade could still refuse it. The endpoint then
        # receives every event of its types, rather than none.
        log.warning("the filter of endpoint %s does not parse: %s", endpoint_id, exc)
        return None


class FilterCache:
    def __init__(self, store: EndpointStore, most: int = MAX_APPLICATIONS) -> None:
        self._store = store
        self._most = most
        self._loaded: OrderedDict[str, LoadedFilters] = OrderedDict()

    async def of(self, application: str, *, reload: bool = False) -> LoadedFilters:
        found = None if reload else self._loaded.get(application)
        if found is None:
            stored = await self._store.filters(application)
            parsed = ((e, _parsed(e, text)) for e, text in stored.filters)
            found = LoadedFilters(stored.version, tuple((e, f) for e, f in parsed if f))
            # Two loads at once: the newer version stays.
            kept = self._loaded.get(application)
            if kept is not None and kept.version > found.version:
                found = kept
            self._loaded[application] = found
            while len(self._loaded) > self._most:
                self._loaded.popitem(last=False)
        self._loaded.move_to_end(application)
        return found


FILTERS = web.AppKey("endpoint_filters", FilterCache)


def setup(app: web.Application, store: EndpointStore) -> None:
    app[FILTERS] = FilterCache(store)


# What ingest.lua and replay.lua answer when the version they are given is not the
# application's (IngestOutcome.STALE, ReplayOutcome.STALE).
STALE = "stale"


class _Answer(Protocol):
    @property
    def outcome(self) -> str: ...


Answer = TypeVar("Answer", bound=_Answer)


async def fan_out_filtered(
    request: web.Request,
    application: str,
    event: FilterEvent,
    attempt: Callable[[int, tuple[str, ...]], Awaitable[Answer]],
) -> Answer:
    """The fan-out step ``attempt`` (ingest or replay), given the filter version it is
    evaluated with and the filtered endpoints the event does not pass; once more with the
    filters read again when the script finds them stale, then a 503."""
    cache = request.app[FILTERS]
    for reload in (False, True):
        loaded = await cache.of(application, reload=reload)
        answer = await attempt(loaded.version, loaded.refused(event))
        if answer.outcome != STALE:
            return answer
    raise ProblemError(
        503,
        "The application's endpoint filters changed twice while the event was fanned out; "
        "nothing was stored. Retry.",
        kind="filters-changing",
        headers={"Retry-After": "1"},
    )
