"""The Lua scripts, each loaded once with a preamble from ``keys.py``: the key table (``K``),
the operational event types (``OPS_TYPES``) and the values no index holds (``UNINDEXED``)."""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from typing import Any

from redis import Redis
from redis.asyncio import Redis as AsyncRedis

from webhook_service.operations import OPERATIONAL_EVENT_TYPES
from webhook_service.store import keys

NAMES = (
    "ingest",
    "lease",
    "record",
    "claim_due",
    "retry",
    "endpoint_save",
    "endpoint_delete",
    "endpoint_state",
    "ratelimit",
    "replay",
    "expunge",
    "trim",
)


def _lua_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _unindexed() -> str:
    """keys.LUA_UNINDEXED as Lua: {dlv_by_status = {["succeeded"] = true}, ...}."""
    return ", ".join(
        f"{kind} = {{{', '.join(f'[{_lua_string(v)}] = true' for v in sorted(values))}}}"
        for kind, values in keys.LUA_UNINDEXED.items()
    )


@cache
def source(name: str) -> str:
    folder = files("webhook_service.store") / "lua"
    table = ", ".join(f"{field} = {_lua_string(value)}" for field, value in keys.LUA_KEYS.items())
    ops = ", ".join(f"[{_lua_string(name)}] = true" for name in OPERATIONAL_EVENT_TYPES)
    return "\n".join(
        (
            f"local K = {{{table}}}",
            f"local OPS_TYPES = {{{ops}}}",
            f"local UNINDEXED = {{{_unindexed()}}}",
            (folder / "common.lua").read_text(),
            (folder / f"{name}.lua").read_text(),
        )
    )


class Scripts:
    """Registered scripts for one client; redis-py reloads them after a server restart."""

    def __init__(self, client: AsyncRedis | Redis) -> None:
        self._scripts: dict[str, Any] = {
            name: client.register_script(source(name)) for name in NAMES
        }

    async def run(self, name: str, args: list[str | int | float]) -> Any:
        return await self._scripts[name](keys=[], args=args)

    def run_sync(self, name: str, args: list[str | int | float]) -> Any:
        return self._scripts[name](keys=[], args=args)
