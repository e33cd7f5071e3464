"""What Redis holds for an event while it is in flight, and what a log record costs in the
outbox until the shipper takes it to SQL.

Workers paused and the scheduler stopped (SIGSTOP: its shipper leaves the outbox alone),
``plan.footprint_events`` events fanning out to ``plan.fanout`` endpoints are accepted:
``used_memory``'s growth over them, less the outbox and the bodies, is what an event and its
pending deliveries cost (their hashes, due entries, the wake-ups); the outbox's ``MEMORY
USAGE`` over its length, what one event record costs (its body inside). Then the workers
deliver them, the scheduler still stopped: the outbox's growth over those deliveries is what
a state record costs (the attempt inside). Finished work leaves Redis once shipped and
WEBHOOK_HOT_SECONDS on, so it has no place in this figure: bench/bench_log.py weighs Redis
after 100 000 delivered events.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any, cast

import orjson

from bench.http_load import closed_loop
from bench.plan import Plan
from bench.rig import Rig
from webhook_service.ids import event_deliveries
from webhook_service.store import keys

# Events whose keys are weighed one by one for the breakdown.
_SAMPLED_EVENTS = 20
# The size of every body: what the figures are taken with.
BODY_BYTES = 100
_LOAD_CONNECTIONS = 32


def _memory(rig: Rig) -> int:
    used: int = rig.redis.info("memory")["used_memory"]
    return used


def _usage(rig: Rig, key: str) -> int:
    # SAMPLES 0: every element of the stream or hash is weighed, not an estimate.
    return int(rig.redis.memory_usage(key, samples=0) or 0)


def _mean(values: list[int]) -> float:
    return sum(values) / len(values) if values else math.nan


def key_bytes(rig: Rig, event_ids: list[str]) -> dict[str, float]:
    """MEMORY USAGE of some events' own keys, averaged: the event's hash (its body taken
    off) and its deliveries' hashes."""
    event_bytes, delivery_bytes, body_bytes = [], [], []
    for event_id in event_ids[:_SAMPLED_EVENTS]:
        event = cast(dict[str, str], rig.redis.hgetall(keys.event(event_id)))
        event_bytes.append(_usage(rig, keys.event(event_id)))
        body_bytes.append(len(event.get("body", "").encode()))
        deliveries = event_deliveries(event_id, event.get("dlvs"))
        delivery_bytes.append(sum(_usage(rig, keys.delivery(d)) for d in deliveries))
    return {
        "event_hash": _mean(event_bytes) - _mean(body_bytes),
        "delivery_hashes": _mean(delivery_bytes),
        "payload": _mean(body_bytes),
    }


def _outbox(rig: Rig) -> tuple[int, int]:
    """The outbox's bytes and its records."""
    return _usage(rig, keys.outbox(0)), int(rig.redis.xlen(keys.outbox(0)))


async def measure(rig: Rig, plan: Plan) -> dict[str, Any]:
    rig.reset()
    await rig.receiver.reset()
    event_type = "bench.footprint"
    await rig.endpoints([f"foot-{n}" for n in range(plan.fanout)], event_type)
    pool = await rig.workers("ours", plan.default_workers)
    request = rig.event_request(event_type, body_bytes=BODY_BYTES)
    # One event through, unmeasured: scripts loaded, connections open.
    await closed_loop(rig.api_port, request, connections=1, count=1)
    await rig.receiver.wait_for(plan.fanout, stall=30.0)
    await rig.receiver.reset()
    await rig.pause(pool)
    await rig.until_shipped()
    rig.settle()
    events = plan.footprint_events
    accepted: list[str] = []

    def on_reply(_index: int, status: int, body: bytes, _at: float) -> None:
        if status == 202:
            accepted.append(orjson.loads(body)["id"])

    with rig.scheduler_paused():
        before = _memory(rig)
        await closed_loop(
            rig.api_port, request, connections=_LOAD_CONNECTIONS, count=events, on_reply=on_reply
        )
        grown = _memory(rig) - before
        parts = key_bytes(rig, accepted)
        event_outbox, event_records = _outbox(rig)
        await rig.resume(pool)
        await rig.receiver.wait_for(len(accepted) * plan.fanout)
        # The receiver counts an arrival before the worker has recorded it.
        await asyncio.sleep(0.5)
        outbox, records = _outbox(rig)
        await rig.pause(pool)
    await rig.until_shipped()
    done = max(1, len(accepted))
    return {
        "events": len(accepted),
        "in_flight_bytes_per_event": (grown - event_outbox) / done - parts["payload"],
        "key_bytes": parts,
        "outbox_bytes_per_event_record": event_outbox / max(1, event_records),
        "outbox_bytes_per_state_record": (outbox - event_outbox) / max(1, records - event_records),
        "body_bytes": BODY_BYTES,
    }
