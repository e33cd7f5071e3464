"""The event loop a process runs its asyncio code on (WEBHOOK_EVENT_LOOP): uvloop, or the
standard library's. One place, so that the API and the workers' delivery threads agree."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import uvloop

from webhook_service.config import Settings

T = TypeVar("T")


def loop_factory(settings: Settings) -> Callable[[], asyncio.AbstractEventLoop]:
    return uvloop.new_event_loop if settings.event_loop == "uvloop" else asyncio.new_event_loop


def run(main: Coroutine[Any, Any, T], settings: Settings) -> T:
    """``asyncio.run`` on the configured loop."""
    with asyncio.Runner(loop_factory=loop_factory(settings)) as runner:
        return runner.run(main)
