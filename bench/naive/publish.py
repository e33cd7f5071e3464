"""The naive baseline's producer: one Celery task per (event, endpoint), as a tutorial's loop."""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence

import orjson
from kombu import Producer

from bench.naive.app import QUEUE, TASK, app

# (url, secret) of each endpoint an event goes to.
Targets = Sequence[tuple[str, str]]


def _body() -> str:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
    return orjson.dumps(
        {"type": "bench.naive", "timestamp": stamp, "data": {"invoice": 42, "amount": 1999}}
    ).decode()


def publish_event(targets: Targets, producer: Producer) -> str:
    """One event's tasks, one per endpoint; returns the event's id."""
    msg_id, body = "msg_" + secrets.token_hex(12), _body()
    for url, secret in targets:
        app.send_task(TASK, args=[url, secret, msg_id, body], queue=QUEUE, producer=producer)
    return msg_id


def publish(targets: Targets, events: int) -> None:
    with app.producer_or_acquire() as producer:
        for _ in range(events):
            publish_event(targets, producer)


def publish_paced(targets: Targets, rate: float, seconds: float) -> dict[str, float]:
    """At a fixed rate of events; each event's id with the wall-clock time it was published."""
    published: dict[str, float] = {}
    start = time.perf_counter()
    with app.producer_or_acquire() as producer:
        for n in range(int(rate * seconds)):
            time.sleep(max(0.0, start + n / rate - time.perf_counter()))
            published[publish_event(targets, producer)] = time.time()
    return published
