"""A TCP proxy between two of our parts that breaks the network between them on command.

Its event loop runs in a thread of its own, so a test switches the fault while the parts
talk through it, whatever loop (or none) the test itself runs. The faults are the ways a
network fails without telling anyone:

* ``BLACKHOLE``: open connections stop carrying anything, either way; new ones are
  accepted (the handshake completes) and never answered.
* ``HALF_OPEN``: open and new connections carry requests to the target, but never its
  replies back.
* ``RESET``: open connections are reset (RST, both sides); new ones are reset once accepted.
* ``LATENCY``: every byte waits ``latency`` seconds, each way.

A connection silenced by a blackhole or a half-open fault stays silent after the fault
ends, like one whose state a NAT or firewall lost: only its ends, by their own timeouts,
can get rid of it. Connections made after the fault ends work again.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Coroutine
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

T = TypeVar("T")

_CHUNK = 65536
_CALL_TIMEOUT = 10.0


class Fault(StrEnum):
    NONE = "none"
    BLACKHOLE = "blackhole"
    HALF_OPEN = "half-open"
    RESET = "reset"
    LATENCY = "latency"


@dataclass(eq=False)  # one per connection, kept in a set by identity
class _Link:
    client: asyncio.StreamWriter
    target: asyncio.StreamWriter | None = None
    silent_requests: bool = False  # client → target
    silent_replies: bool = False  # target → client
    pumps: list[asyncio.Task[None]] = field(default_factory=list)


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with SO_LINGER 0: the kernel sends RST rather than FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class FaultProxy:
    """Listens on 127.0.0.1:``port`` and forwards to ``target_host:target_port``."""

    def __init__(self, target_host: str, target_port: int, *, latency: float) -> None:
        self._target = (target_host, target_port)
        self.latency = latency
        self.fault = Fault.NONE
        self.port = 0
        self._links: set[_Link] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"fault-proxy-{target_port}", daemon=True
        )
        self._server: asyncio.Server | None = None

    def start(self) -> FaultProxy:
        self._thread.start()
        self._server = self._call(asyncio.start_server(self._accept, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def set(self, fault: Fault) -> None:
        """Switch to ``fault`` (``NONE`` ends it); returns once open connections have it."""
        self._call(self._apply(fault))

    def redirect(self, url: str) -> str:
        """``url`` (``redis://``, ``http://``…) with its host and port replaced by ours."""
        parts = urlsplit(url)
        userinfo, _, _ = parts.netloc.rpartition("@")
        netloc = f"{userinfo}@127.0.0.1:{self.port}" if userinfo else f"127.0.0.1:{self.port}"
        return urlunsplit(parts._replace(netloc=netloc))

    def close(self) -> None:
        if self._thread.is_alive():
            self._call(self._shutdown())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(_CALL_TIMEOUT)
        self._loop.close()

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(_CALL_TIMEOUT)

    async def _apply(self, fault: Fault) -> None:
        self.fault = fault
        for link in list(self._links):
            if fault is Fault.BLACKHOLE:
                link.silent_requests = link.silent_replies = True
            elif fault is Fault.HALF_OPEN:
                link.silent_replies = True
            elif fault is Fault.RESET:
                self._drop(link, reset=True)

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        pumps = [pump for link in self._links for pump in link.pumps]
        for link in list(self._links):
            self._drop(link, reset=True)
        await asyncio.gather(*pumps, return_exceptions=True)

    def _drop(self, link: _Link, *, reset: bool) -> None:
        self._links.discard(link)
        for pump in link.pumps:
            pump.cancel()
        for writer in (link.client, link.target):
            if writer is not None and reset:
                _reset(writer)
            elif writer is not None:
                writer.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        link = _Link(writer)
        if self.fault is Fault.RESET:
            _reset(writer)
            return
        self._links.add(link)
        if self.fault is Fault.BLACKHOLE:
            link.silent_requests = link.silent_replies = True
            # Nothing behind it: what the client sends is read and dropped until it hangs up.
            link.pumps.append(asyncio.create_task(self._pump(link, reader, None, replies=False)))
            return
        link.silent_replies = self.fault is Fault.HALF_OPEN
        try:
            target_reader, link.target = await asyncio.open_connection(*self._target)
        except OSError:
            self._drop(link, reset=True)
            return
        link.pumps += [
            asyncio.create_task(self._pump(link, reader, link.target, replies=False)),
            asyncio.create_task(self._pump(link, target_reader, writer, replies=True)),
        ]

    async def _pump(
        self,
        link: _Link,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter | None,
        *,
        replies: bool,
    ) -> None:
        """One direction. Bytes go through a queue stamped with when they may leave, so
        latency delays them without slowing the reading, and they keep their order."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue()
        sender = asyncio.create_task(self._send(link, queue, writer, replies=replies))
        try:
            with contextlib.suppress(OSError):
                while data := await reader.read(_CHUNK):
                    delay = self.latency if self.fault is Fault.LATENCY else 0.0
                    queue.put_nowait((loop.time() + delay, data))
            queue.put_nowait(None)
            with contextlib.suppress(OSError):
                await sender
        finally:
            sender.cancel()
        # The client hung up: the target is told, whatever the link carries (it would find
        # out by its own keep-alive). The target hung up: the client hears it only if
        # replies still get through.
        if not replies or not link.silent_replies:
            self._drop(link, reset=False)

    async def _send(
        self,
        link: _Link,
        queue: asyncio.Queue[tuple[float, bytes] | None],
        writer: asyncio.StreamWriter | None,
        *,
        replies: bool,
    ) -> None:
        loop = asyncio.get_running_loop()
        while (item := await queue.get()) is not None:
            due, data = item
            await asyncio.sleep(max(0.0, due - loop.time()))
            silent = link.silent_replies if replies else link.silent_requests
            if writer is not None and not silent:
                writer.write(data)
                await writer.drain()
