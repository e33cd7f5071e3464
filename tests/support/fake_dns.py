"""A resolver answering from a table the test controls, so names can point anywhere."""

from __future__ import annotations

import socket
from collections.abc import Mapping, Sequence

from aiohttp.abc import AbstractResolver, ResolveResult


class FakeResolver(AbstractResolver):
    """Answers from a fixed table; unknown names fail like a real NXDOMAIN.

    The table is mutable: changing an entry between two lookups is how a test makes a name
    resolve somewhere else later (DNS rebinding)."""

    def __init__(self, table: Mapping[str, Sequence[str]] | None = None) -> None:
        self.table: dict[str, Sequence[str]] = dict(table or {})
        self.calls: list[tuple[str, int, int]] = []
        self.closed = False

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.calls.append((host, port, family))
        if host not in self.table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [
            ResolveResult(
                hostname=host,
                host=addr,
                port=port,
                family=socket.AF_INET6 if ":" in addr else socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
            for addr in self.table[host]
        ]

    async def close(self) -> None:
        self.closed = True
