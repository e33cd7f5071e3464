"""What recording an attempt's headers costs the AOF (issue 15): the AOF growth of 1 000
attempts, each against a receiver answering 5 ordinary headers, with the headers recorded
and with them stripped before the record (what an attempt cost before they were).

In one process, on an embedded Valkey (AOF on, as `webhook-service up` runs it): the API
in-process takes the events (wake-ups off, no scheduler, so nothing else writes), then the
delivery engine leases, sends and records them in batches. Only the delivery phase is
measured, from INFO persistence's aof_current_size; automatic rewrites are off for the
run, so the file only grows.

    .venv/bin/python -m bench.bench_attempt_headers [--attempts 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer
from redis.asyncio import Redis

from tests.support.api_app import api_app
from webhook_service.config import Settings
from webhook_service.crypto import generate_master_key
from webhook_service.delivery.engine import DeliveryEngine
from webhook_service.embedded import EmbeddedValkey, start_valkey
from webhook_service.history.database import sync_engine, upgrade
from webhook_service.store import keys
from webhook_service.store.deliveries import DeliveryStore, Recorded
from webhook_service.store.scripts import Scripts
from webhook_service.wiring import aiohttp_transport, health_policy, retry_policy, secret_box

BATCH = 50


class HeadlessStore(DeliveryStore):
    """Records each attempt without its headers: what the record held before them."""

    async def record(self, **kwargs: Any) -> Recorded:
        kwargs["attempt"] = replace(kwargs["attempt"], request_headers={}, response_headers={})
        return await super().record(**kwargs)


async def answer(_request: web.Request) -> web.Response:
    # aiohttp adds Content-Type, Content-Length, Date and Server: five in all.
    return web.Response(text="ok", headers={"X-Request-Id": secrets.token_hex(8)})


async def aof_size(client: Redis) -> int:
    size: int = (await client.info("persistence"))["aof_current_size"]
    return size


async def measure(
    settings: Settings, client: Redis, api: aiohttp.ClientSession, base: str, url: str,
    attempts: int, store_type: type[DeliveryStore],
) -> tuple[int, int]:  # fmt: skip
    """AOF bytes of ``attempts`` attempts recorded through ``store_type``, and the mean
    length of an outbox entry's attempt field."""
    await client.delete(keys.due(0), keys.outbox(0))
    async with api.post(base + "/v1/endpoints", json={"url": url}) as made:
        endpoint = (await made.json())["id"]
    for n in range(attempts):
        async with api.post(base + "/v1/events", json={"type": "bench.h", "data": {"n": n}}):
            pass
    due = [str(i) for i in await client.zrange(keys.due(0), 0, -1)]
    assert len(due) == attempts, len(due)
    transport = aiohttp_transport(settings)
    engine = DeliveryEngine(
        store_type(client, Scripts(client)),
        transport,
        secret_box(settings),
        retry_policy(settings),
        health_policy(settings),
        lease_ms=30_000,
        request_timeout=15.0,
        endpoint_concurrency=BATCH,  # a batch to one endpoint at once: none parked
    )
    await client.xtrim(keys.outbox(0), maxlen=0)
    before = await aof_size(client)
    try:
        for start in range(0, attempts, BATCH):
            results = await engine.run(due[start : start + BATCH])
            assert all(r.status == "succeeded" for r in results), results
    finally:
        await transport.close()
    grown = await aof_size(client) - before
    # decode_responses: ids and fields are str (redis-py types them for either).
    entries = cast(list[tuple[str, dict[str, str]]], await client.xrange(keys.outbox(0)))
    fields = [len(f[keys.OutboxField.ATTEMPT]) for _, f in entries if keys.OutboxField.ATTEMPT in f]
    async with api.delete(base + f"/v1/endpoints/{endpoint}"):
        pass
    return grown, sum(fields) // max(1, len(fields))


async def main(attempts: int) -> None:
    directory = Path(tempfile.mkdtemp(prefix="bench-headers-"))
    valkey: EmbeddedValkey = start_valkey(directory / "valkey")
    try:
        runs = await run_both(valkey, directory, attempts)
    finally:
        valkey.stop()
    (aof_without, field_without), (aof_with, field_with) = runs["without"], runs["with"]
    print(
        f"{attempts} attempts, 5 answer headers: AOF {aof_without / attempts:.0f} B/attempt "
        f"without headers, {aof_with / attempts:.0f} B with "
        f"(+{(aof_with - aof_without) / attempts:.0f} B); outbox attempt field "
        f"{field_without} -> {field_with} B"
    )


async def run_both(
    valkey: EmbeddedValkey, directory: Path, attempts: int
) -> dict[str, tuple[int, int]]:
    admin = "bench-" + secrets.token_urlsafe(32)
    settings = Settings(
        redis_url=valkey.url, admin_key=admin, master_key=generate_master_key(),
        data_dir=directory, allowed_networks="127.0.0.0/8", wake_workers=False,
    )  # fmt: skip
    upgrade_log(settings)
    client = Redis.from_url(valkey.url, decode_responses=True)
    await client.config_set("auto-aof-rewrite-percentage", 0)
    receiver = web.Application()
    receiver.router.add_post("/hook", answer)
    runner = web.AppRunner(receiver)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        url = f"http://127.0.0.1:{runner.addresses[0][1]}/hook"
        server = TestServer(await api_app(settings), host="127.0.0.1")
        await server.start_server()
        try:
            headers = {"Authorization": f"Bearer {admin}"}
            async with aiohttp.ClientSession(headers=headers) as api:
                base = str(server.make_url("")).rstrip("/")
                return {
                    name: await measure(settings, client, api, base, url, attempts, store)
                    for name, store in (("without", HeadlessStore), ("with", DeliveryStore))
                }
        finally:
            await server.close()
    finally:
        await runner.cleanup()
        await client.aclose()


def upgrade_log(settings: Settings) -> None:
    engine = sync_engine(settings)
    try:
        upgrade(engine)
    finally:
        engine.dispose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=1000)
    asyncio.run(main(parser.parse_args().attempts))
