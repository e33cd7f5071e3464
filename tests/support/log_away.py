"""The delivery log's database away, for the tests of what goes on meanwhile: a scheduler
whose shipper can never write, and the outbox shipped by hand once the log is back."""

from __future__ import annotations

import redis
import sqlalchemy as sa

from tests.support.stack import Stack, settings_of
from webhook_service.embedded import free_port
from webhook_service.history.database import sync_engine
from webhook_service.history.shipper import Shipper
from webhook_service.history.shipper import outbox_length as shipper_outbox_length


def unreachable_log_url() -> str:
    """PostgreSQL on a free port of this host: nothing listens, every connection is refused
    at once (a database that is down, not one that hangs)."""
    return f"postgresql://postgres@127.0.0.1:{free_port()}/log"


def start_shipless_scheduler(stack: Stack) -> None:
    """The stack's scheduler, its log pointed at nobody: it passes as ever, wakes what is
    due, and its shipper fails each batch, so the outbox only grows."""
    stack.start("scheduler", env={"WEBHOOK_LOG_URL": unreachable_log_url()})


def outbox_length(stack: Stack) -> int:
    client = redis.Redis.from_url(stack.valkey.url, decode_responses=True)
    try:
        return shipper_outbox_length(client)
    finally:
        client.close()


def ship_all(stack: Stack) -> int:
    """Everything in the outbox into the stack's own log (its SQLite), through a shipper of
    our own, lock or not: the records shipped."""
    settings = settings_of(stack.env)
    client = redis.Redis.from_url(stack.valkey.url, decode_responses=True)
    engine: sa.Engine = sync_engine(settings)
    try:
        shipper = Shipper(client, engine, settings)
        total = 0
        while shipped := shipper.ship_batch():
            total += shipped
        return total
    finally:
        engine.dispose()
        client.close()
