"""HTTP over a raw socket, for what a client library never does: a body cut into pieces
with pauses between them, a stall mid-request, a connection that goes quiet."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from tests.support.stack import ADMIN_KEY


@dataclass(frozen=True)
class RawReply:
    status: int
    headers: dict[str, str]  # names lower-cased
    body: bytes

    def json(self) -> object:
        return orjson.loads(self.body)


def request_head(
    method: str,
    path: str,
    headers: dict[str, str],
    *,
    key: str | None = ADMIN_KEY,
) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: test"]
    if key is not None:
        lines.append(f"Authorization: Bearer {key}")
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def pieces(data: bytes, size: int) -> list[bytes]:
    """``data`` cut into pieces of ``size`` bytes: what one TCP segment carries (1 448)."""
    return [data[n : n + size] for n in range(0, len(data), size)]


def chunked(parts: Sequence[bytes]) -> list[bytes]:
    """Each part as one chunk of a chunked body, then the last chunk."""
    return [f"{len(part):x}\r\n".encode() + part + b"\r\n" for part in parts] + [b"0\r\n\r\n"]


async def read_reply(reader: asyncio.StreamReader, timeout: float = 30.0) -> RawReply:
    async with asyncio.timeout(timeout):
        head = await reader.readuntil(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in header_lines:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
    return RawReply(int(status_line.split()[1]), headers, body)


async def send_in_pieces(
    host: str, port: int, head: bytes, body_parts: Sequence[bytes], gap: float
) -> RawReply:
    """The head in one write, then each body part ``gap`` seconds after the last."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(head)
        await writer.drain()
        for part in body_parts:
            await asyncio.sleep(gap)
            writer.write(part)
            await writer.drain()
        return await read_reply(reader)
    finally:
        writer.close()


async def closed_by_peer(reader: asyncio.StreamReader, within: float) -> bool:
    """Whether the server ends the connection (EOF or reset) within ``within`` seconds;
    whatever it answers first is read and dropped."""
    try:
        async with asyncio.timeout(within):
            while await reader.read(65536):
                pass
    except TimeoutError:
        return False
    except ConnectionError:
        pass
    return True
