"""The loopback subscriber: verifies every signature and notes when each delivery arrived.

Runs as its own process (``python -m bench.receiver --port N``) so that it never competes
with the load generator for one interpreter lock. Endpoints are paths, ``/hooks/{name}``;
the bench tells it each endpoint's secret and reads back the arrivals over ``/_bench/*``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
import uvloop
from aiohttp import web

from signer import Verifier, WebhookVerificationError

# The headers django-webhook signs with (bench/bench_django_webhook.py).
_PEER_SIGNATURE = "Django-Webhook-Signature-v1"
_PEER_TIMESTAMP = "Django-Webhook-Request-Timestamp"
_PEER_UUID = "Django-Webhook-UUID"


@dataclass
class Sink:
    verifiers: dict[str, Verifier] = field(default_factory=dict)
    # The same secrets as they were given, for the django-webhook baseline's own scheme.
    secrets: dict[str, str] = field(default_factory=dict)
    # (endpoint, webhook-id, wall-clock arrival): wall clock, so the bench can compare it with
    # the moment its own process saw the 202.
    arrivals: list[tuple[str, str, float]] = field(default_factory=list)
    rejected: int = 0
    # Kept as they come: the bench polls the stats every 50 ms, and a min and max over
    # 300 000 arrivals each time would cost this process more than the arrivals do.
    first: float | None = None
    last: float | None = None

    async def hook(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        body = await request.read()
        try:
            if _PEER_SIGNATURE in request.headers:
                delivery_id = self._verify_peer(name, body, request)
            else:
                verifier = self.verifiers.get(name)
                if verifier is None:
                    raise WebhookVerificationError(f"no secret for {name}")
                verifier.verify(body, request.headers)
                delivery_id = request.headers["webhook-id"]
        except WebhookVerificationError:
            self.rejected += 1
            return web.Response(status=401)
        now = time.time()
        self.arrivals.append((name, delivery_id, now))
        self.first = now if self.first is None else min(self.first, now)
        self.last = now if self.last is None else max(self.last, now)
        return web.Response()

    def _verify_peer(self, name: str, body: bytes, request: web.Request) -> str:
        """django-webhook's scheme: hex HMAC-SHA256 of ``{timestamp}:{body}`` keyed with the
        secret's text, one per secret, comma-separated. Its only per-request id is the saved
        object's, so that (with the webhook's UUID) names the delivery."""
        secret = self.secrets.get(name)
        if secret is None:
            raise WebhookVerificationError(f"no secret for {name}")
        signed = request.headers[_PEER_TIMESTAMP].encode() + b":" + body
        expected = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
        if not any(
            hmac.compare_digest(expected, given)
            for given in request.headers[_PEER_SIGNATURE].split(",")
        ):
            raise WebhookVerificationError("no signature matches")
        return f"{request.headers[_PEER_UUID]}:{orjson.loads(body)['object']['id']}"

    async def set_secrets(self, request: web.Request) -> web.Response:
        secrets: dict[str, str] = orjson.loads(await request.read())
        self.secrets.update(secrets)
        self.verifiers.update({name: Verifier([s]) for name, s in secrets.items()})
        return web.Response()

    async def stats(self, _: web.Request) -> web.Response:
        reply = {
            "received": len(self.arrivals),
            "rejected": self.rejected,
            "first": self.first,
            "last": self.last,
        }
        return web.Response(body=orjson.dumps(reply), content_type="application/json")

    async def dump(self, _: web.Request) -> web.Response:
        return web.Response(body=orjson.dumps(self.arrivals), content_type="application/json")

    async def reset(self, _: web.Request) -> web.Response:
        self.arrivals.clear()
        self.rejected = 0
        self.first = self.last = None
        return web.Response()


def app() -> web.Application:
    sink = Sink()
    application = web.Application()
    application.router.add_post("/hooks/{name}", sink.hook)
    application.router.add_put("/_bench/secrets", sink.set_secrets)
    application.router.add_get("/_bench/stats", sink.stats)
    application.router.add_get("/_bench/arrivals", sink.dump)
    application.router.add_post("/_bench/reset", sink.reset)
    return application


@dataclass
class ReceiverControl:
    """The bench's side of the ``/_bench/*`` routes."""

    port: int
    session: aiohttp.ClientSession

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/{name}"

    async def _call(self, method: str, route: str, body: bytes | None = None) -> Any:
        url = f"http://127.0.0.1:{self.port}/_bench/{route}"
        async with self.session.request(method, url, data=body) as reply:
            reply.raise_for_status()
            raw = await reply.read()
            return orjson.loads(raw) if raw else None

    async def set_secrets(self, secrets: dict[str, str]) -> None:
        await self._call("PUT", "secrets", orjson.dumps(secrets))

    async def stats(self) -> dict[str, Any]:
        result: dict[str, Any] = await self._call("GET", "stats")
        return result

    async def arrivals(self) -> list[tuple[str, str, float]]:
        return [(n, i, t) for n, i, t in await self._call("GET", "arrivals")]

    async def reset(self) -> None:
        await self._call("POST", "reset")

    async def wait_for(self, expected: int, stall: float = 15.0) -> dict[str, Any]:
        """Poll until ``expected`` deliveries arrived, or none arrived for ``stall`` seconds."""
        seen, quiet_since = -1, time.monotonic()
        while True:
            stats = await self.stats()
            if stats["received"] >= expected:
                return stats
            if stats["received"] != seen:
                seen, quiet_since = stats["received"], time.monotonic()
            elif time.monotonic() - quiet_since > stall:
                return stats
            await asyncio.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    web.run_app(
        app(),
        host="127.0.0.1",
        port=args.port,
        print=None,
        access_log=None,
        loop=uvloop.new_event_loop(),
    )


if __name__ == "__main__":
    main()
