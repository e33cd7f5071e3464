"""The delivery log in tests: lists are read from SQL, which the shipper fills from the Redis
outbox a batch at a time, so a test that lists what it just sent waits for it first
(``wait_logged``); a test of one store component ships by hand (``local_log``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import redis
from redis.asyncio import Redis

from tests.support.stack import settings_of
from webhook_service.history.database import async_engine, sync_engine, upgrade
from webhook_service.history.reader import HistoryReader
from webhook_service.history.records import stream_seq
from webhook_service.history.shipper import Shipper
from webhook_service.store import keys
from webhook_service.store.deliveries import DeliveryStore
from webhook_service.store.events import EventStore
from webhook_service.store.scripts import Scripts

Entries = list[tuple[str, dict[str, str]]]


async def wait_logged(redis_url: str, timeout: float = 15.0) -> None:
    """Until every log record written before the call is committed in SQL: the shipper
    trims the outbox only up to what it committed, so once the oldest record left is newer
    than the newest at the call (or none is left), all of those are in SQL. Other tests'
    records may keep coming meanwhile; they are not waited for."""
    client = Redis.from_url(redis_url, decode_responses=True)
    try:
        marks: dict[int, int] = {}
        for bucket in keys.all_buckets():
            newest = cast(Entries, await client.xrevrange(keys.outbox(bucket), count=1))
            if newest:
                marks[bucket] = stream_seq(newest[0][0])
        deadline = time.monotonic() + timeout
        while marks:
            for bucket, mark in list(marks.items()):
                oldest = cast(Entries, await client.xrange(keys.outbox(bucket), count=1))
                if not oldest or stream_seq(oldest[0][0]) > mark:
                    del marks[bucket]  # each bucket's outbox is shipped in its own order
            if not marks:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the log outbox was not shipped within {timeout}s")
            await asyncio.sleep(0.02)
    finally:
        await client.aclose()


@dataclass
class LocalLog:
    """A delivery log of a test's own (SQLite in a temp dir, migrated) on a bare Valkey: the
    real shipper, called by the test, and the reader the API serves the history with."""

    shipper: Shipper
    reader: HistoryReader

    def ship(self) -> int:
        """The whole outbox into SQL: how many records were shipped."""
        shipped = 0
        while batch := self.shipper.ship_batch():
            shipped += batch
        return shipped


@asynccontextmanager
async def local_log(
    directory: Path, redis_url: str, env: Mapping[str, str] | None = None
) -> AsyncIterator[LocalLog]:
    settings = settings_of({"WEBHOOK_DATA_DIR": str(directory), **(env or {})})
    writing = sync_engine(settings)
    upgrade(writing)
    reading = async_engine(settings)
    sync_client = redis.Redis.from_url(redis_url, decode_responses=True)
    client = Redis.from_url(redis_url, decode_responses=True)
    scripts = Scripts(client)
    reader = HistoryReader(
        reading, DeliveryStore(client, scripts), EventStore(client, scripts), settings.log_timeout
    )
    try:
        yield LocalLog(Shipper(sync_client, writing, settings), reader)
    finally:
        await reading.dispose()
        writing.dispose()
        await client.aclose()
        sync_client.close()
