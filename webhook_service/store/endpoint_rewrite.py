"""Rewriting stored endpoints offline (``rotate-master-key``, ``migrate``): every endpoint,
one at a time, each rewrite atomic against a concurrent write from a running process."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from enum import StrEnum

import redis
from redis.typing import EncodableT, FieldT

from webhook_service.store import keys

# Conflicts on one endpoint before giving up: each retry means someone else wrote it.
_MAX_ATTEMPTS = 50


class Rewrite(StrEnum):
    REWRITTEN = "rewritten"
    UNCHANGED = "unchanged"  # nothing to do
    MISSING = "missing"  # deleted between the listing and the rewrite


class RewriteConflict(RuntimeError):
    """One endpoint kept changing under us; rerun to finish it."""


def text(value: object) -> str:
    """A reply as text, whether or not the client decodes responses."""
    if isinstance(value, bytes):
        return value.decode()
    return "" if value is None else str(value)


def endpoint_ids(client: redis.Redis, batch: int) -> Iterator[str]:
    """Every endpoint id, a bucket after another, a page at a time (each bucket's
    ``endpoints`` has score 0, ordered by id)."""
    for bucket in keys.all_buckets():
        lower = "-"
        while True:
            page = [
                text(i) for i in client.zrangebylex(keys.endpoints(bucket), lower, "+", 0, batch)
            ]
            yield from page
            if len(page) < batch:
                break
            lower = "(" + page[-1]


def rewrite_endpoint(
    client: redis.Redis,
    endpoint_id: str,
    fields: Sequence[str],
    change: Callable[[list[str]], Mapping[str, str] | None],
) -> Rewrite:
    """Read ``fields`` of one endpoint (as text) and write what ``change`` makes of them
    (None: nothing to write), under WATCH: a write by anyone else in between makes it read
    and decide again."""
    key = keys.endpoint(endpoint_id)
    for _ in range(_MAX_ATTEMPTS):
        with client.pipeline(transaction=True) as pipe:
            try:
                # redis-py leaves watch untyped; after it the pipeline runs commands at once.
                pipe.watch(key)  # type: ignore[no-untyped-call]
                if not pipe.exists(key):
                    return Rewrite.MISSING
                values = [text(value) for value in pipe.hmget(key, list(fields))]
                changed = change(values)
                if changed is None:
                    return Rewrite.UNCHANGED
                pipe.multi()
                mapping: dict[FieldT, EncodableT] = {k: v for k, v in changed.items()}
                pipe.hset(key, mapping=mapping)
                pipe.execute()
                return Rewrite.REWRITTEN
            except redis.WatchError:
                continue  # the endpoint changed since we read it: read it again
    raise RewriteConflict(f"endpoint {endpoint_id} changed {_MAX_ATTEMPTS} times while rewritten")
