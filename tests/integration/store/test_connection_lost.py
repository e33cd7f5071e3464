"""A pooled connection the network has reset is a connection lost, on either event loop.

The API's client keeps its connections in a pool; one the network has since reset is only
found out when a command is written on it. Under uvloop that write raises RuntimeError,
which redis-py does not count as a lost connection: the request would fail with a bare 500
instead of being retried on a fresh connection (store/connect.py).
"""

from __future__ import annotations

import asyncio
from typing import Literal

import pytest

from tests.support.fault_proxy import Fault, FaultProxy
from webhook_service.config import Settings
from webhook_service.embedded import EmbeddedValkey
from webhook_service.event_loop import run
from webhook_service.store.connect import async_client

pytestmark = pytest.mark.parametrize("loop", ["asyncio", "uvloop"])


async def _command_after_reset(proxy: FaultProxy, url: str) -> object:
    client = async_client(proxy.redirect(url))
    try:
        await client.set("connection-lost", "before")
        await asyncio.to_thread(proxy.set, Fault.RESET)
        await asyncio.to_thread(proxy.set, Fault.NONE)
        # Let the loop see the reset, as a pooled connection idle for a while would.
        await asyncio.sleep(0.1)
        await client.set("connection-lost", "after")
        return await client.get("connection-lost")
    finally:
        await client.aclose()


def test_a_command_on_a_reset_connection_goes_on_a_fresh_one(
    valkey: EmbeddedValkey, loop: Literal["asyncio", "uvloop"]
) -> None:
    settings = Settings.model_construct(event_loop=loop)
    proxy = FaultProxy("127.0.0.1", valkey.port, latency=0.0).start()
    try:
        assert run(_command_after_reset(proxy, valkey.url), settings) == "after"
    finally:
        proxy.close()
