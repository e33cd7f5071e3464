"""Operational events asked for by steps outside the default application's bucket.

An operational event (endpoint.disabled, delivery.exhausted, endpoint.recovered) belongs to
no application and goes to the operations endpoints, which are the default application's:
its keys are of that bucket. The record step that causes one runs in the failing delivery's
bucket, and no step crosses buckets; so there it only appends a request, with the event's id
chosen up front (common.lua emit_ops; in the default bucket it makes the event at once).
``forward`` hands each bucket's requests to ``lua/ops_emit.lua`` in the default bucket, which
makes each event once (``OpsEmitArgs`` in, ``OpsEmitted`` out), then drops them where they
were: a crash between the two hands them over again, to no effect, and nothing is lost. The
shipper runs it on every pass (history/shipper.py), each scheduler's for the buckets it
holds, so an event is made a pass after the step that asked for it
(WEBHOOK_LOG_SHIP_INTERVAL, 0.2 s).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from webhook_service.store import keys
from webhook_service.store.endpoint_rewrite import text
from webhook_service.store.scripts import Scripts

# Requests one bucket hands over a pass at most.
BATCH = 100


class OpsEmitted(StrEnum):
    """What ops_emit.lua answers per request."""

    MADE = "made"
    MADE_BEFORE = "made_before"  # handed over twice: made once


@dataclass(frozen=True)
class OpsEmitArgs:
    """ops_emit.lua's arguments, in the order its head names them."""

    requests: Sequence[str]  # as the record step wrote them (JSON)

    def keys(self) -> list[str]:
        return [keys.sub_ops(keys.DEFAULT_BUCKET)]

    def argv(self) -> list[str | int | float]:
        return list(self.requests)


def forward(scripts: Scripts, buckets: Iterable[int] | None = None) -> int:
    """The waiting requests of ``buckets`` (a scheduler's: those it holds the lease of;
    every bucket when None) made into their events (up to ``BATCH`` a bucket), then
    dropped: how many were made now. One round trip reads their lists."""
    client = scripts.sync_client
    polled = keys.all_buckets() if buckets is None else buckets
    sources = sorted(b for b in polled if b != keys.DEFAULT_BUCKET)
    with client.pipeline(transaction=False) as pipe:
        for bucket in sources:
            pipe.lrange(keys.ops_requests(bucket), 0, BATCH - 1)
        waiting = [[text(r) for r in found] for found in pipe.execute()]
    made = 0
    for bucket, requests in zip(sources, waiting, strict=True):
        if not requests:
            continue
        args = OpsEmitArgs(requests)
        answers = scripts.run_sync("ops_emit", args.keys(), args.argv())
        made += sum(1 for a in answers if OpsEmitted(text(a)) is OpsEmitted.MADE)
        # Each by its text (they are unique: each names its own event id): another list
        # entry appended meanwhile, or another forwarder's, is left alone.
        with client.pipeline(transaction=False) as pipe:
            for request in requests:
                pipe.lrem(keys.ops_requests(bucket), 1, request)
            pipe.execute()
    return made
