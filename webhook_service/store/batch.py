"""Calls of one script made in the same turn of the event loop, sent in one round trip.

A worker records each attempt as its answer arrives, and the answers of a wake-up's sends
arrive together: one pipeline (``Scripts.run_many``) for the records made in one turn
costs Valkey one read, one reply write and one AOF write for them all, and redis-py one
pool checkout, where a call each pays those per record. Each call keeps its own outcome:
its reply, or the error the server gave it; a lost connection fails every call of the
round trip, and each caller tries again as it would have alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from webhook_service.store.scripts import ArgT, Scripts

_Call = tuple[Sequence[str], Sequence[ArgT], "asyncio.Future[Any]"]


class ScriptBatch:
    def __init__(self, scripts: Scripts, name: str) -> None:
        self._scripts = scripts
        self._name = name
        self._waiting: list[_Call] = []
        # The round trips under way: the loop keeps only weak references to tasks.
        self._sending: set[asyncio.Task[None]] = set()

    async def run(self, script_keys: Sequence[str], args: Sequence[ArgT]) -> Any:
        loop = asyncio.get_running_loop()
        if not self._waiting:
            # After every callback ready in this turn: the calls they make join this one.
            loop.call_soon(self._send)
        future: asyncio.Future[Any] = loop.create_future()
        self._waiting.append((script_keys, args, future))
        return await future

    def _send(self) -> None:
        calls, self._waiting = self._waiting, []
        task = asyncio.create_task(self._round_trip(calls))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _round_trip(self, calls: list[_Call]) -> None:
        try:
            replies = await self._scripts.run_many(self._name, [(k, a) for k, a, _ in calls])
        except Exception as exc:  # every caller gets it, and decides
            replies = [exc] * len(calls)
        except asyncio.CancelledError:
            # The loop is closing: no caller may wait on a round trip that will not end.
            for _, _, future in calls:
                future.cancel()
            raise
        for (_, _, future), reply in zip(calls, replies, strict=True):
            if future.done():  # its caller was cancelled
                continue
            if isinstance(reply, Exception):
                future.set_exception(reply)
            else:
                future.set_result(reply)
