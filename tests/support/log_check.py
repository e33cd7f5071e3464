"""The log's promise, checked after a fault: every attempt a receiver saw is in SQL exactly
once, every event accepted is in SQL, and the outbox is empty (DESIGN.md §2, invariant 5).

A receiver's request is an attempt we recorded only if no worker died between the POST and
its record; the tests that use this kill schedulers and the database, never a worker, so
there the two counts must be equal, not merely close."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass

import redis
import sqlalchemy as sa

from tests.support.receiver import Receiver
from webhook_service.history import tables
from webhook_service.history.shipper import outbox_length

# (endpoint id, event id): one delivery.
Pair = tuple[str, str]


@dataclass(frozen=True)
class LogState:
    outbox: int  # records not yet shipped
    events: int  # accepted events in SQL
    pending: int  # their deliveries SQL holds as pending, or not yet at all
    seen: Counter[Pair]  # POSTs the receiver saw, per delivery
    logged: Counter[Pair]  # attempt rows in SQL, per delivery
    doubled: int  # (delivery, attempt number) pairs with more than one row

    @property
    def complete(self) -> bool:
        return (
            self.outbox == 0
            and self.pending == 0
            and self.seen == self.logged
            and self.doubled == 0
        )


def log_state(
    engine: sa.Engine,
    client: redis.Redis,
    receiver: Receiver,
    endpoints: Mapping[str, str],
    accepted: Collection[str],
) -> LogState:
    """``endpoints``: the receiver's endpoint names to their ids; ``accepted``: event ids
    answered 202, each sent to every endpoint."""
    wanted = set(accepted)
    ids = set(endpoints.values())
    seen = Counter(
        (endpoints[r.endpoint], r.webhook_id)
        for r in receiver.received
        if r.endpoint in endpoints and r.webhook_id in wanted
    )
    outbox = outbox_length(client)
    d, a, e = tables.deliveries.c, tables.attempts.c, tables.events.c
    with engine.connect() as conn:
        events = {row for row in conn.execute(sa.select(e.id)).scalars() if row in wanted}
        final = conn.execute(
            sa.select(d.endpoint_id, d.event_id).where(d.status != "pending")
        ).all()
        tried = conn.execute(
            sa.select(d.endpoint_id, d.event_id, a.delivery_id, a.number).join(
                tables.attempts, a.delivery_id == d.id
            )
        ).all()
    finished = {(r.endpoint_id, r.event_id) for r in final if r.event_id in wanted}
    finished &= {(endpoint, event) for endpoint in ids for event in wanted}
    ours = [r for r in tried if r.event_id in wanted and r.endpoint_id in ids]
    numbers = Counter((r.delivery_id, r.number) for r in ours)
    return LogState(
        outbox=outbox,
        events=len(events),
        pending=len(ids) * len(wanted) - len(finished),
        seen=seen,
        logged=Counter((r.endpoint_id, r.event_id) for r in ours),
        doubled=sum(1 for count in numbers.values() if count > 1),
    )


async def wait_log_complete(
    engine: sa.Engine,
    redis_url: str,
    receiver: Receiver,
    endpoints: Mapping[str, str],
    accepted: Collection[str],
    timeout: float = 60.0,
) -> LogState:
    """Until every delivery is final in SQL and the log holds exactly what the receiver
    saw, with an empty outbox; then the state. Fails with what is missing or doubled."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    deadline = time.monotonic() + timeout
    try:
        while True:
            state = await asyncio.to_thread(
                log_state, engine, client, receiver, endpoints, accepted
            )
            if state.complete and state.events == len(set(accepted)):
                return state
            if time.monotonic() > deadline:
                missing = state.seen - state.logged
                extra = state.logged - state.seen
                raise AssertionError(
                    f"log incomplete after {timeout}s: outbox {state.outbox}, events "
                    f"{state.events} of {len(set(accepted))}, pending {state.pending}, "
                    f"attempts seen and not logged {sum(missing.values())} "
                    f"(e.g. {list(missing)[:3]}), logged and not seen {sum(extra.values())}, "
                    f"doubled {state.doubled}"
                )
            await asyncio.sleep(0.5)
    finally:
        client.close()
