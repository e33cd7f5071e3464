"""store/batch.py: the calls of one turn go in one round trip, and each keeps its outcome."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError, ResponseError

from webhook_service.store.batch import ScriptBatch
from webhook_service.store.scripts import ArgT, Scripts


class Server(Scripts):
    """Answers each call with its first argument, or with the error a call asks for; never
    connects (the client is never used)."""

    def __init__(self, down: bool = False, closing: bool = False) -> None:
        super().__init__(Redis())
        self.round_trips: list[list[str]] = []
        self.down = down
        self.closing = closing  # the round trip is cancelled, as when the loop closes

    async def run_many(
        self, name: str, calls: Sequence[tuple[Sequence[str], Sequence[ArgT]]]
    ) -> list[Any]:
        assert name == "record"
        self.round_trips.append([str(args[0]) for _, args in calls])
        await asyncio.sleep(0)  # the reply comes in a later turn, as from a socket
        if self.down:
            raise ConnectionError("reset by peer")
        if self.closing:
            raise asyncio.CancelledError
        return [ResponseError("refused") if a[0] == "bad" else f"ok {a[0]}" for _, a in calls]


async def test_the_calls_of_one_turn_share_one_round_trip() -> None:
    server = Server()
    batch = ScriptBatch(server, "record")
    replies = await asyncio.gather(*(batch.run(["k"], [str(n)]) for n in range(5)))
    assert replies == [f"ok {n}" for n in range(5)]
    assert server.round_trips == [["0", "1", "2", "3", "4"]]


async def test_a_call_made_later_goes_in_a_round_trip_of_its_own() -> None:
    server = Server()
    batch = ScriptBatch(server, "record")
    assert await batch.run(["k"], ["a"]) == "ok a"
    assert await batch.run(["k"], ["b"]) == "ok b"
    assert server.round_trips == [["a"], ["b"]]


async def test_a_refused_call_fails_alone() -> None:
    batch = ScriptBatch(Server(), "record")
    replies = await asyncio.gather(
        batch.run(["k"], ["a"]), batch.run(["k"], ["bad"]), batch.run(["k"], ["c"]),
        return_exceptions=True,
    )  # fmt: skip
    assert replies[0] == "ok a" and replies[2] == "ok c"
    assert isinstance(replies[1], ResponseError)


async def test_a_lost_connection_fails_every_call_of_the_round_trip() -> None:
    batch = ScriptBatch(Server(down=True), "record")
    replies = await asyncio.gather(
        batch.run(["k"], ["a"]), batch.run(["k"], ["b"]), return_exceptions=True
    )
    assert [type(r) for r in replies] == [ConnectionError, ConnectionError]


async def test_a_cancelled_caller_leaves_the_others_their_replies() -> None:
    server = Server()
    batch = ScriptBatch(server, "record")
    gone = asyncio.ensure_future(batch.run(["k"], ["a"]))
    kept = asyncio.ensure_future(batch.run(["k"], ["b"]))
    await asyncio.sleep(0)  # both wait in the batch
    gone.cancel()
    assert await kept == "ok b"
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert server.round_trips == [["a", "b"]]


async def test_a_cancelled_round_trip_leaves_no_caller_waiting() -> None:
    batch = ScriptBatch(Server(closing=True), "record")
    replies = await asyncio.gather(
        batch.run(["k"], ["a"]), batch.run(["k"], ["b"]), return_exceptions=True
    )
    assert [type(r) for r in replies] == [asyncio.CancelledError, asyncio.CancelledError]
