"""Receivers that attack the sender, each a raw asyncio socket server on loopback.

What a framework receiver cannot do: answer with a body that drips a byte a second or never
ends, a megabyte of headers, headers and then silence, a TLS handshake that never finishes,
or a socket that is never read (with a receive buffer so small that the sender's write
blocks). Each server records its connections, so a test sees how many attempts reached it
and when the sender hung up.

``python -m tests.support.hostile_receivers KIND`` serves one in a process of its own and
prints its URL (``in_child``): what it allocates is then not counted with the sender's.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

# 1 MB of headers, within aiohttp's default bounds (8 190 bytes a line, 128 lines): only
# bounds of our own refuse it.
FLOOD_OTHER_HEADERS = 2  # Connection and Content-Length, after the flood
FLOOD_HEADERS = 128 - FLOOD_OTHER_HEADERS
FLOOD_HEADER_BYTES = 8000
# Linux doubles SO_RCVBUF (its floor is 2 304 bytes): a request much larger than this can
# never be written out whole to the never-read socket.
SMALL_RECEIVE_BUFFER = 4096
DRIP_LENGTH = 1_000_000  # announced, at one byte a drip: eleven days at one a second
ENDLESS_CHUNK = b"x" * 65536


class Kind(StrEnum):
    DRIP_BODY = "drip-body"  # a status and a long Content-Length, then a byte a drip
    ENDLESS_BODY = "endless-body"  # a status, then a chunked body as fast as it is read
    HEADER_FLOOD = "header-flood"  # a status and 1 MB of headers
    HEADERS_THEN_STALL = "headers-then-stall"  # a status and a Content-Length, then nothing
    TLS_STALL = "tls-stall"  # reads the ClientHello, never answers it
    NEVER_READS = "never-reads"  # accepts, reads nothing, answers nothing


@dataclass
class Connection:
    opened: float  # time.monotonic()
    request: bytes = b""  # what was read of the request (the ClientHello for TLS_STALL)
    sent: int = 0  # bytes written back
    closed: float | None = None  # when the sender hung up, as seen here (never: NEVER_READS)


@dataclass
class HostileReceiver:
    kind: Kind
    status: int = 200  # of the answers that have a status line
    drip_every: float = 1.0
    flood_headers: int = FLOOD_HEADERS
    flood_header_bytes: int = FLOOD_HEADER_BYTES
    connections: list[Connection] = field(default_factory=list)
    _listener: socket.socket | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    _held: list[socket.socket] = field(default_factory=list)

    @property
    def port(self) -> int:
        if self._listener is None:
            raise RuntimeError("not started")
        return int(self._listener.getsockname()[1])

    def url(self, path: str = "/hook") -> str:
        scheme = "https" if self.kind is Kind.TLS_STALL else "http"
        return f"{scheme}://127.0.0.1:{self.port}{path}"

    def hung_up(self) -> list[Connection]:
        return [c for c in self.connections if c.closed is not None]

    async def __aenter__(self) -> HostileReceiver:
        await self.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.stop()

    async def start(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if self.kind is Kind.NEVER_READS:
            # Before listen(): accepted sockets inherit it, and the window the handshake
            # announces is already small.
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL_RECEIVE_BUFFER)
        listener.bind(("127.0.0.1", 0))
        listener.listen(128)
        listener.setblocking(False)
        self._listener = listener
        self._spawn(self._accept_forever(listener))

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for held in self._held:
            held.close()
        if self._listener is not None:
            self._listener.close()

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _accept_forever(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            accepted, _ = await loop.sock_accept(listener)
            connection = Connection(time.monotonic())
            self.connections.append(connection)
            if self.kind is Kind.NEVER_READS:
                self._held.append(accepted)  # never read, never written; closed at stop()
            else:
                self._spawn(self._serve(accepted, connection))

    async def _serve(self, accepted: socket.socket, connection: Connection) -> None:
        reader, writer = await asyncio.open_connection(sock=accepted)
        try:
            if self.kind is Kind.TLS_STALL:
                await _read_client_hello(reader, connection)
            else:
                await _read_request(reader, connection)
                await self._answer(writer, connection)
            await _until_hung_up(reader)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the sender hung up mid-answer: what its deadline looks like from here
        finally:
            writer.close()
        # Not when stop() cancels this: that is no hang-up of the sender's.
        connection.closed = time.monotonic()

    async def _answer(self, writer: asyncio.StreamWriter, connection: Connection) -> None:
        status = f"HTTP/1.1 {self.status} Hostile\r\n"
        if self.kind is Kind.DRIP_BODY:
            await _write(writer, connection, f"{status}Content-Length: {DRIP_LENGTH}\r\n\r\n")
            for _ in range(DRIP_LENGTH):
                await _write(writer, connection, "x")
                await asyncio.sleep(self.drip_every)
        elif self.kind is Kind.ENDLESS_BODY:
            await _write(writer, connection, f"{status}Transfer-Encoding: chunked\r\n\r\n")
            chunk = f"{len(ENDLESS_CHUNK):x}\r\n".encode() + ENDLESS_CHUNK + b"\r\n"
            while True:
                await _write(writer, connection, chunk)
        elif self.kind is Kind.HEADER_FLOOD:
            value = "a" * self.flood_header_bytes
            flood = "".join(f"X-Flood-{n}: {value}\r\n" for n in range(self.flood_headers))
            # A whole answer, so a sender would reuse the connection: it may not, as only one
            # request is read here.
            close = "Connection: close\r\nContent-Length: 2\r\n\r\nok"
            await _write(writer, connection, f"{status}{flood}{close}")
        elif self.kind is Kind.HEADERS_THEN_STALL:
            await _write(writer, connection, f"{status}Content-Length: 100\r\n\r\n")


async def _read_request(reader: asyncio.StreamReader, connection: Connection) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    connection.request = head + await reader.readexactly(length)


async def _read_client_hello(reader: asyncio.StreamReader, connection: Connection) -> None:
    # A TLS record: type 0x16 (handshake), version, 2-byte length; the ClientHello inside.
    record = await reader.readexactly(5)
    if record[0] != 0x16:
        raise RuntimeError(f"not a TLS handshake record: {record!r}")
    connection.request = record + await reader.readexactly(int.from_bytes(record[3:5], "big"))


async def _write(writer: asyncio.StreamWriter, connection: Connection, data: str | bytes) -> None:
    raw = data.encode() if isinstance(data, str) else data
    writer.write(raw)
    await writer.drain()
    connection.sent += len(raw)


async def _until_hung_up(reader: asyncio.StreamReader) -> None:
    """Wait for EOF or a reset from the sender, dropping whatever it sends."""
    with contextlib.suppress(ConnectionError):
        while await reader.read(65536):
            pass


@contextlib.contextmanager
def in_child(kind: Kind) -> Iterator[str]:
    """The receiver in a process of its own; yields its URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.hostile_receivers", kind.value],
        stdout=subprocess.PIPE,
    )
    try:
        assert process.stdout is not None  # stdout=PIPE above
        yield process.stdout.readline().decode().strip()
    finally:
        process.kill()
        process.wait()


async def _serve_until_killed(kind: Kind) -> None:
    receiver = HostileReceiver(kind)
    await receiver.start()
    print(receiver.url(), flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(_serve_until_killed(Kind(sys.argv[1])))
