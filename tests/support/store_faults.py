"""A store that refuses, driven from outside: the load, the routes polled, what they answered,
what the logs say, and a Valkey directory on a small tmpfs (for a full disk).

Used by the chaos tests of a Valkey at ``maxmemory`` and of a full AOF disk: a producer sends
events to a real API process while the other routes are polled; every answer is counted by
route and status, with whatever would break the promise (a 500, a text/plain page, a 503
that is not a problem document with ``Retry-After``) kept for the assertion message.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import orjson
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.support.receiver import Receiver
from tests.support.stack import ADMIN_KEY
from webhook_service.store.refusals import Refusal

PROBLEM = "application/problem+json"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
# Statuses a route may give while the store refuses, besides a 503 problem document.
_FINE: dict[str, frozenset[int]] = {
    "ingest": frozenset({202}),
    "tick": frozenset({200, 409}),  # 409: another tick holds the lock
}
_READ = frozenset({200})


@dataclass
class Answers:
    """Every answer, by route and status; the ones that break the promise, described."""

    codes: Counter[tuple[str, int]] = field(default_factory=Counter)
    wrong: list[str] = field(default_factory=list)
    longest: float = 0.0  # seconds: the slowest answer (the longest stall a client saw)

    def note(self, route: str, response: aiohttp.ClientResponse, body: bytes, took: float) -> None:
        self.codes[(route, response.status)] += 1
        self.longest = max(self.longest, took)
        why = _wrong(route, response, body)
        if why is not None and len(self.wrong) < 20:
            self.wrong.append(f"{route}: {response.status} {why}: {body[:200]!r}")

    def count(self, route: str, status: int) -> int:
        return self.codes[(route, status)]

    def table(self) -> str:
        return ", ".join(
            f"{route} {status}: {n}" for (route, status), n in sorted(self.codes.items())
        )


def _wrong(route: str, response: aiohttp.ClientResponse, body: bytes) -> str | None:
    content_type = response.headers.get("Content-Type", "")
    if response.status == 503:
        if not content_type.startswith(PROBLEM):
            return f"a 503 in {content_type!r}"
        if not response.headers.get("Retry-After"):
            return "a 503 without Retry-After"
        problem = orjson.loads(body)
        if problem.get("status") != 503:
            return "a 503 whose problem says otherwise"
        return None
    if response.status not in _FINE.get(route, _READ):
        return f"unexpected ({content_type})"
    return None


async def produce(
    session: aiohttp.ClientSession, base: str, count: int, concurrency: int, answers: Answers
) -> list[str]:
    """``count`` events, each sent once, ``concurrency`` at a time: the ids answered 202."""
    accepted: list[str] = []
    numbers = iter(range(count))

    async def sender() -> None:
        for n in numbers:
            started = time.monotonic()
            body = {"type": "refusal.test", "data": {"n": n}}
            async with session.post(f"{base}/v1/events", json=body, headers=ADMIN) as response:
                raw = await response.read()
                answers.note("ingest", response, raw, time.monotonic() - started)
                if response.status == 202:
                    accepted.append(orjson.loads(raw)["id"])

    await asyncio.gather(*(sender() for _ in range(concurrency)))
    return accepted


async def sign_in(session: aiohttp.ClientSession, base: str) -> None:
    """A dashboard session in ``session``'s cookie jar (made while the store still writes)."""
    async with session.post(
        f"{base}/dashboard/login", data={"key": ADMIN_KEY}, allow_redirects=False
    ) as response:
        assert response.status == 303, await response.text()


@dataclass(frozen=True)
class Route:
    name: str
    method: str
    path: str
    headers: dict[str, str]


def polled_routes(cron_secret: str, event_id: str) -> list[Route]:
    """The history, one event, the metrics, the tick and two dashboard pages."""
    tick = {"Authorization": f"Bearer {cron_secret}"}
    return [
        Route("events", "GET", "/v1/events?limit=5", ADMIN),
        Route("deliveries", "GET", "/v1/deliveries?limit=5", ADMIN),
        Route("event", "GET", f"/v1/events/{event_id}", ADMIN),
        Route("metrics", "GET", "/metrics", ADMIN),
        Route("tick", "POST", "/v1/cron/tick?limit=20", tick),
        Route("dashboard", "GET", "/dashboard", {}),
        Route("dashboard-deliveries", "GET", "/dashboard/deliveries", {}),
    ]


async def poll(
    session: aiohttp.ClientSession,
    base: str,
    routes: list[Route],
    answers: Answers,
    stop: asyncio.Event,
) -> None:
    """Each route in turn until ``stop``; the session holds the dashboard cookie."""
    while not stop.is_set():
        for route in routes:
            started = time.monotonic()
            async with session.request(
                route.method, base + route.path, headers=route.headers, allow_redirects=False
            ) as response:
                answers.note(
                    route.name, response, await response.read(), time.monotonic() - started
                )
        await asyncio.sleep(0.1)


def undelivered(receiver: Receiver, endpoints: tuple[str, ...], accepted: list[str]) -> set[str]:
    """Accepted events some endpoint has not taken (a verified request answered 2xx)."""
    taken = {
        (r.endpoint, r.webhook_id)
        for r in receiver.received
        if r.verified and r.status is not None and 200 <= r.status < 300
    }
    return {e for e in accepted if any((name, e) not in taken for name in endpoints)}


def sends_per_delivery(receiver: Receiver) -> Counter[tuple[str, str]]:
    """Verified requests per (endpoint name, webhook-id): each an attempt the log must hold."""
    return Counter((r.endpoint, r.webhook_id) for r in receiver.received if r.verified)


_WARNING = re.compile(r" WARNING .*store refusal \((?P<cause>[a-z-]+)\)")


@dataclass(frozen=True)
class LogFindings:
    tracebacks: int
    errors: int
    refusal_warnings: Counter[Refusal]


def read_log(path: Path) -> LogFindings:
    text = path.read_text(errors="replace")
    causes = Counter(Refusal(m["cause"]) for m in _WARNING.finditer(text))
    return LogFindings(text.count("Traceback"), text.count(" ERROR "), causes)


# Spins until SCRIPT KILL (a script that writes nothing may be killed).
_SPIN = "local t = redis.call('TIME')[1]; while redis.call('TIME')[1] - t < 30 do end"


@contextlib.contextmanager
def busy(url: str) -> Iterator[None]:
    """A script running past busy-reply-threshold: every other command is answered BUSY."""
    client = redis.Redis.from_url(url)
    client.config_set("busy-reply-threshold", 100)

    def spin() -> None:
        # Killed, below (a ResponseError): it is over. Its client waits for the reply however
        # long, and never sends the script again: redis-py's default 5 s read timeout and its
        # retries would start a second spin behind the first (seen on a loaded machine).
        once = redis.Redis.from_url(url, socket_timeout=None, retry=Retry(NoBackoff(), 0))
        with contextlib.suppress(redis.ResponseError):
            once.eval(_SPIN, 0)
        once.close()

    spinner = threading.Thread(target=spin)
    spinner.start()
    time.sleep(0.5)  # past the threshold
    try:
        yield
    finally:
        client.script_kill()
        spinner.join()
        client.config_set("busy-reply-threshold", 5000)
        client.close()


@contextlib.contextmanager
def full(url: str) -> Iterator[None]:
    """maxmemory below what Valkey holds: every command that could grow it is refused."""
    client = redis.Redis.from_url(url)
    client.config_set("maxmemory", 1)
    try:
        yield
    finally:
        client.config_set("maxmemory", 0)
        client.close()


@contextlib.contextmanager
def tmpfs(mountpoint: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` on ``mountpoint``, unmounted afterwards whatever happened (lazily,
    if a process still holds a file there)."""
    mountpoint.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(mountpoint)],
        check=True,
    )
    try:
        yield mountpoint
    finally:
        if subprocess.run(["umount", str(mountpoint)], check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(mountpoint)], check=False)


def grow_tmpfs(mountpoint: Path, size: str) -> None:
    """Free space the way an operator would: give the filesystem more room."""
    subprocess.run(["mount", "-o", f"remount,size={size}", str(mountpoint)], check=True)
