"""The machine's floors, measured in the same run: the least any ingest or receiver can cost.

``python -m bench.floors ingest --port N --redis-url URL`` serves a minimal aiohttp handler
that parses the JSON body and does one XADD, on the same libraries and event loop as the
real API; ``python -m bench.floors receiver --port N`` serves a minimal receiver that reads
the body and answers 200 on the same loop as the bench receiver. Nothing else: no auth, no
validation, no signature.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
import uvloop
from aiohttp import web
from redis.asyncio import Redis

from bench.http_load import build_request, closed_loop
from bench.ingest import fixed_rates, highest_sustained
from bench.plan import Plan
from bench.procs import Child, free_port, wait_port
from bench.rig import Rig
from bench.stats import spread
from webhook_service.store.connect import async_client

FLOOR_STREAM = "bench:floor"
# Enough connections in flight to keep one server process saturated.
CONNECTIONS = 64
# A webhook of about the size the service sends, with the headers a receiver gets.
_WEBHOOK_BODY = b'{"type": "invoice.paid", "timestamp": "2026-11-29T16:27:14.123Z", "data": {}}'
_WEBHOOK_HEADERS = {
    "Content-Type": "application/json",
    "webhook-id": "msg_2mQ8x1bWb2X5mVzg8fYb0sQ2pLk",
    "webhook-timestamp": "1764431234",
    "webhook-signature": "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=",
}
_REDIS = web.AppKey("redis", Redis)


async def _ingest(request: web.Request) -> web.Response:
    event = orjson.loads(await request.read())
    entry = await request.app[_REDIS].xadd(FLOOR_STREAM, {"body": orjson.dumps(event)})
    entry_id = entry if isinstance(entry, str) else entry.decode()
    return web.json_response({"id": entry_id}, status=202)


def ingest_app(redis_url: str) -> web.Application:
    app = web.Application()
    app.router.add_post("/v1/events", _ingest)

    async def client(application: web.Application) -> AsyncIterator[None]:
        # The API's own client: a blocking pool of its size, so that under a stall (an AOF
        # rewrite's fork) requests wait for a connection as the API's do, rather than fail
        # as they do past 100 with redis-py's default pool.
        application[_REDIS] = async_client(redis_url)
        yield
        await application[_REDIS].aclose()

    app.cleanup_ctx.append(client)
    return app


async def _receive(request: web.Request) -> web.Response:
    await request.read()
    return web.Response()


def receiver_app() -> web.Application:
    app = web.Application()
    app.router.add_post("/hooks/{name}", _receive)
    return app


def start_ingest_floor(rig: Rig) -> tuple[Child, int]:
    """The ingest floor's server on the rig's Valkey, listening: it and its port."""
    port = free_port()
    args = ["-m", "bench.floors", "ingest", "--port", str(port), "--redis-url", rig.valkey.url]
    server = rig.launch("floor-ingest", args)
    wait_port(server, port)
    return server, port


async def measure(rig: Rig, plan: Plan) -> dict[str, Any]:
    """Receiver floor (req/s), then the ingest floor: req/s, fixed rates, sustained rate."""
    port = free_port()
    receiver = rig.launch("floor-receiver", ["-m", "bench.floors", "receiver", "--port", str(port)])
    wait_port(receiver, port)
    webhook = build_request("POST", "/hooks/floor", port, _WEBHOOK_BODY, _WEBHOOK_HEADERS)
    receiver_rates = [
        (
            await closed_loop(
                port, lambda _i: webhook, connections=CONNECTIONS, duration=plan.floor_seconds
            )
        ).throughput
        for _ in range(plan.repeats)
    ]
    rig.stop("floor-receiver")

    server, port = start_ingest_floor(rig)
    request = rig.event_request("bench.floor", port)

    async def prepare() -> None:
        rig.redis.unlink(FLOOR_STREAM)

    ingest_rates = [
        (
            await closed_loop(port, request, connections=CONNECTIONS, duration=plan.floor_seconds)
        ).throughput
        for _ in range(plan.repeats)
    ]
    fixed = await fixed_rates(rig, server, port, request, plan, prepare)
    search = await highest_sustained(port, request, plan, prepare, start=1000.0)
    rig.stop("floor-ingest")
    await prepare()
    return {
        "receiver_rps": spread(receiver_rates),
        "ingest_rps": spread(ingest_rates),
        "ingest_fixed": fixed,
        "ingest_sustained": search,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=("ingest", "receiver"))
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--redis-url", default="")
    args = parser.parse_args()
    if args.kind == "ingest":
        # The default loop, as `webhook-service api` runs it.
        app, loop = ingest_app(args.redis_url), asyncio.new_event_loop()
    else:
        app, loop = receiver_app(), uvloop.new_event_loop()
    web.run_app(app, host="127.0.0.1", port=args.port, print=None, access_log=None, loop=loop)


if __name__ == "__main__":
    main()
