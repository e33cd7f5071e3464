"""An HTTP/1.1 load generator on bare asyncio protocols: open loop, closed loop, bursts.

Open loop: request *i* is due at ``start + i / rate`` whatever the server does, and its
latency counts from that scheduled time, so a stalled server shows up as latency instead
of quietly slowing the generator down (no coordinated omission). A request due while
every connection is busy opens another one, up to a cap, then waits in line, its clock
running. Bare protocols rather than an HTTP client library: on a 2-core machine the
generator shares the CPU with the server, and it must not be what saturates first.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import cast

from bench.stats import percentile

# What one request is: built once per index so a run can vary bodies cheaply.
RequestFactory = Callable[[int], bytes]
# Called with the request's index, the status, the body and the wall-clock completion time.
ReplyHook = Callable[[int, int, bytes, float], None]


def build_request(
    method: str, path: str, port: int, body: bytes = b"", headers: Mapping[str, str] | None = None
) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def _parse(buffer: bytearray) -> tuple[int, bytes, int] | None:
    """One complete response at the head of ``buffer``: status, body, bytes it took."""
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        return None
    head = bytes(buffer[:end]).lower()
    length = 0
    at = head.find(b"\r\ncontent-length:")
    if at >= 0:
        eol = head.find(b"\r\n", at + 2)
        length = int(head[at + 17 : eol if eol >= 0 else len(head)])
    elif b"\r\ntransfer-encoding:" in head:
        raise ValueError("chunked responses are not supported by this generator")
    total = end + 4 + length
    if len(buffer) < total:
        return None
    return int(head[9:12]), bytes(buffer[end + 4 : total]), total


@dataclass
class _Job:
    index: int
    due: float  # perf_counter time the latency is measured from
    request: bytes


@dataclass
class LoadResult:
    sent: int
    latencies_ms: list[float]
    errors: int  # non-2xx answers, broken connections and requests never answered
    elapsed_s: float
    statuses: Counter[int] = field(default_factory=Counter)

    @property
    def completed(self) -> int:
        return len(self.latencies_ms)

    @property
    def throughput(self) -> float:
        ok = self.completed - sum(n for s, n in self.statuses.items() if not 200 <= s < 300)
        return ok / self.elapsed_s if self.elapsed_s > 0 else math.nan

    def summary(self) -> dict[str, float]:
        lat = self.latencies_ms
        return {
            "sent": self.sent,
            "completed": self.completed,
            "errors": self.errors,
            "p50_ms": percentile(lat, 50),
            "p99_ms": percentile(lat, 99),
            "max_ms": max(lat) if lat else math.nan,
            "throughput": self.throughput,
        }


class _Connection(asyncio.Protocol):
    def __init__(self, pool: _Pool) -> None:
        self._pool = pool
        self._buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.job: _Job | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio.Transport, but they are one.
        self.transport = cast(asyncio.Transport, transport)
        self._pool.ready(self)

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        while (reply := _parse(self._buffer)) is not None:
            status, body, used = reply
            del self._buffer[:used]
            self._pool.answered(self, status, body)

    def connection_lost(self, exc: Exception | None) -> None:
        self._pool.lost(self)


class _Pool:
    """Keep-alive connections to one server, one request in flight on each."""

    def __init__(self, port: int, max_connections: int, on_reply: ReplyHook | None) -> None:
        self._loop = asyncio.get_running_loop()
        self._port = port
        self._max = max_connections
        self._on_reply = on_reply
        self._idle: list[_Connection] = []
        self._all: set[_Connection] = set()
        self._dialing = 0
        self._waiting: deque[_Job] = deque()
        self.latencies_ms: list[float] = []
        self.statuses: Counter[int] = Counter()
        self.failed = 0
        self.settled = 0
        self.on_settled: Callable[[], None] | None = None
        self._expected = math.inf
        self._all_settled = asyncio.Event()

    def submit(self, job: _Job) -> None:
        if self._idle:
            self._send(self._idle.pop(), job)
            return
        self._waiting.append(job)
        if len(self._all) + self._dialing < self._max:
            self._dial()

    def _dial(self) -> None:
        self._dialing += 1
        dialing = self._loop.create_task(
            self._loop.create_connection(lambda: _Connection(self), "127.0.0.1", self._port)
        )
        dialing.add_done_callback(self._dialed)

    def _dialed(self, task: asyncio.Task[tuple[asyncio.BaseTransport, _Connection]]) -> None:
        self._dialing -= 1
        if task.exception() is not None and self._waiting:
            self._fail(self._waiting.popleft())

    def _send(self, conn: _Connection, job: _Job) -> None:
        assert conn.transport is not None
        conn.job = job
        conn.transport.write(job.request)

    def ready(self, conn: _Connection) -> None:
        self._all.add(conn)
        self._next(conn)

    def _next(self, conn: _Connection) -> None:
        if self._waiting:
            self._send(conn, self._waiting.popleft())
        else:
            self._idle.append(conn)

    def answered(self, conn: _Connection, status: int, body: bytes) -> None:
        job, conn.job = conn.job, None
        if job is None:
            return
        self.latencies_ms.append((time.perf_counter() - job.due) * 1000)
        self.statuses[status] += 1
        if not 200 <= status < 300:
            self.failed += 1
        if self._on_reply is not None:
            self._on_reply(job.index, status, body, time.time())
        self._settle()
        self._next(conn)

    def _fail(self, _job: _Job) -> None:
        self.failed += 1
        self._settle()

    def _settle(self) -> None:
        self.settled += 1
        if self.on_settled is not None:
            self.on_settled()
        if self.settled >= self._expected:
            self._all_settled.set()

    async def settle(self, expected: int, within: float) -> None:
        """Wait until ``expected`` requests were answered or failed, at most ``within`` s."""
        self._expected = expected
        if self.settled >= expected:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._all_settled.wait(), within)

    def lost(self, conn: _Connection) -> None:
        self._all.discard(conn)
        if conn in self._idle:
            self._idle.remove(conn)
        if conn.job is not None:
            job, conn.job = conn.job, None
            self._fail(job)

    def close(self) -> None:
        for conn in list(self._all):
            if conn.transport is not None:
                conn.transport.close()
        # Never answered: each counts as an error (a timeout), not as a missing sample.
        self.failed += len(self._waiting) + sum(1 for c in self._all if c.job is not None)


def _result(pool: _Pool, sent: int, elapsed: float) -> LoadResult:
    return LoadResult(sent, pool.latencies_ms, pool.failed, elapsed, pool.statuses)


async def open_loop(
    port: int,
    request: RequestFactory,
    rate: float,
    duration: float,
    *,
    max_connections: int = 512,
    on_reply: ReplyHook | None = None,
    drain_timeout: float = 10.0,
) -> LoadResult:
    """Fixed arrival rate; latency from each request's scheduled time."""
    pool = _Pool(port, max_connections, on_reply)
    total = int(rate * duration)
    # perf_counter, not loop.time(): uvloop's clock ticks in whole milliseconds.
    start = time.perf_counter() + 0.05
    sent = 0
    while sent < total:
        now = time.perf_counter()
        while sent < total and start + sent / rate <= now:
            pool.submit(_Job(sent, start + sent / rate, request(sent)))
            sent += 1
        if sent < total:
            await asyncio.sleep(max(0.0, start + sent / rate - time.perf_counter()))
    await pool.settle(total, drain_timeout)
    elapsed = time.perf_counter() - start
    pool.close()
    return _result(pool, total, elapsed)


async def closed_loop(
    port: int,
    request: RequestFactory,
    *,
    connections: int,
    duration: float | None = None,
    count: int | None = None,
    on_reply: ReplyHook | None = None,
    drain_timeout: float = 30.0,
) -> LoadResult:
    """As fast as the server answers: each connection sends again once answered.

    Stops after ``duration`` seconds or after ``count`` requests, whichever is given.
    Latency counts from the moment each request was handed to the pool.
    """
    if (duration is None) == (count is None):
        raise ValueError("give exactly one of duration and count")
    pool = _Pool(port, connections, on_reply)
    start = time.perf_counter()
    stop_at = start + duration if duration is not None else math.inf
    limit = count if count is not None else math.inf
    sent = 0

    def refill() -> None:
        nonlocal sent
        # One new request per answer keeps exactly `connections` in flight.
        if sent < limit and time.perf_counter() < stop_at:
            pool.submit(_Job(sent, time.perf_counter(), request(sent)))
            sent += 1

    pool.on_settled = refill
    for _ in range(connections):
        refill()
    if duration is not None:
        await asyncio.sleep(duration)
        await pool.settle(sent, drain_timeout)
    else:
        await pool.settle(int(limit), drain_timeout)
    elapsed = time.perf_counter() - start
    pool.close()
    return _result(pool, sent, elapsed)
