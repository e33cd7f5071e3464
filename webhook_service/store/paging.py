"""One page of records listed by a lex-ordered index of time-sortable ids."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import cast

from redis.asyncio import Redis


async def newest_first(
    redis: Redis, index: str, record_key: Callable[[str], str], limit: int, cursor: str | None
) -> tuple[list[tuple[str, dict[str, str]]], str | None]:
    """Up to ``limit`` (id, hash) pairs, newest first, and the cursor of the next page.

    ``record_key`` makes an id's hash key. The cursor is the last id of the previous page;
    an id whose hash has just gone is skipped.
    """
    upper = f"({cursor}" if cursor else "+"
    ids = cast(list[str], await redis.zrevrangebylex(index, upper, "-", start=0, num=limit + 1))
    more = len(ids) > limit
    ids = ids[:limit]
    async with redis.pipeline(transaction=False) as pipe:
        for record_id in ids:
            pipe.hgetall(record_key(record_id))
        rows = await pipe.execute()
    found = [(i, raw) for i, raw in zip(ids, rows, strict=True) if raw]
    return found, (ids[-1] if more and ids else None)


async def newest_first_of(
    redis: Redis,
    indexes: Sequence[str],
    record_key: Callable[[str], str],
    limit: int,
    cursor: str | None,
) -> tuple[list[tuple[str, dict[str, str]]], str | None]:
    """``newest_first`` over several indexes at once (one per bucket), merged by id: the
    newest ``limit`` of them all. ``record_key`` makes an id's hash key (its bucket's)."""
    upper = f"({cursor}" if cursor else "+"
    async with redis.pipeline(transaction=False) as pipe:
        for index in indexes:
            pipe.zrevrangebylex(index, upper, "-", start=0, num=limit + 1)
        pages = cast(list[list[str]], await pipe.execute())
    ids = list(heapq.merge(*pages, reverse=True))[: limit + 1]
    more = len(ids) > limit
    ids = ids[:limit]
    async with redis.pipeline(transaction=False) as pipe:
        for record_id in ids:
            pipe.hgetall(record_key(record_id))
        rows = await pipe.execute()
    found = [(i, raw) for i, raw in zip(ids, rows, strict=True) if raw]
    return found, (ids[-1] if more and ids else None)
