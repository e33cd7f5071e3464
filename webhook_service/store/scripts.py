"""The Lua scripts, each loaded once with a preamble from ``keys.py``: the key table (``K``),
the operational event types (``OPS_TYPES``), the log outbox's field names (``LOG``), the
final delivery states (``FINAL``), the lifetimes of the endpoint stats windows (``TTL``) and
the default application, which a script creates on its first use (``DEFAULT_APP``, from
``applications.py``).

Each script's first line is its shebang, which this moves above the preamble: ``#!lua``, or
``#!lua flags=allow-oom`` for the steps that carry work already accepted to its end (lease,
record, claim_due, release). At ``maxmemory`` the server refuses a plain ``#!lua`` script
before it writes anything, and runs an ``allow-oom`` one whole: a full store takes no new
work but still delivers, records and lets go of what it holds. Without a shebang the server
would decide by the script's first write command, which no one reading the script sees."""

from __future__ import annotations

import hashlib
from functools import cache
from importlib.resources import files
from typing import Any, cast

from redis import Redis
from redis.asyncio import Redis as AsyncRedis
from redis.exceptions import NoScriptError

from webhook_service.operations import OPERATIONAL_EVENT_TYPES
from webhook_service.store import keys
from webhook_service.store.applications import DEFAULT_APP_ID, DEFAULT_APP_NAME, DEFAULT_APP_UID
from webhook_service.store.states import FINAL_STATUSES

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
    "release",
    "revive",
    "app_save",
    "app_end",
)


def _lua_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _outbox_fields() -> str:
    """keys.OutboxField as Lua: {event = "e", ...}."""
    return ", ".join(f"{f.name.lower()} = {_lua_string(f.value)}" for f in keys.OutboxField)


def _final() -> str:
    """states.FINAL_STATUSES as Lua: {["failed"] = true, ...}."""
    return ", ".join(f"[{_lua_string(s)}] = true" for s in sorted(FINAL_STATUSES))


def _default_app() -> str:
    """The default application as Lua: {id = "app_default", uid = ..., name = ...}."""
    fields = {"id": DEFAULT_APP_ID, "uid": DEFAULT_APP_UID, "name": DEFAULT_APP_NAME}
    return ", ".join(f"{k} = {_lua_string(v)}" for k, v in fields.items())


SHEBANGS = ("#!lua", "#!lua flags=allow-oom")


@cache
def source(name: str) -> str:
    folder = files("webhook_service.store") / "lua"
    shebang, body = (folder / f"{name}.lua").read_text().split("\n", 1)
    if shebang not in SHEBANGS:
        raise ValueError(f"{name}.lua must begin with one of {SHEBANGS}, not {shebang!r}")
    table = ", ".join(f"{field} = {_lua_string(value)}" for field, value in keys.LUA_KEYS.items())
    ops = ", ".join(f"[{_lua_string(name)}] = true" for name in OPERATIONAL_EVENT_TYPES)
    return "\n".join(
        (
            shebang,
            f"local K = {{{table}}}",
            f"local OPS_TYPES = {{{ops}}}",
            f"local LOG = {{{_outbox_fields()}}}",
            f"local FINAL = {{{_final()}}}",
            f"local TTL = {{{', '.join(f'{k} = {v}' for k, v in keys.WINDOW_TTL.items())}}}",
            f"local DEFAULT_APP = {{{_default_app()}}}",
            (folder / "common.lua").read_text(),
            body,
        )
    )


class Scripts:
    """The scripts for one client, run by SHA and loaded again when the server has lost them
    (a restart, SCRIPT FLUSH). This is what redis-py's registered Script objects do, minus
    their per-call isinstance check against a typing Protocol class, which cost the API 6 %
    of its CPU under ingest load."""

    def __init__(self, client: AsyncRedis | Redis) -> None:
        self._client = client
        self._sha = {name: hashlib.sha1(source(name).encode()).hexdigest() for name in NAMES}  # noqa: S324 - Redis names scripts by SHA-1

    async def run(self, name: str, args: list[str | int | float]) -> Any:
        client = cast(AsyncRedis, self._client)
        try:
            return await client.evalsha(self._sha[name], 0, *args)
        except NoScriptError:
            await client.script_load(source(name))
            return await client.evalsha(self._sha[name], 0, *args)

    def run_sync(self, name: str, args: list[str | int | float]) -> Any:
        client = cast(Redis, self._client)
        try:
            return client.evalsha(self._sha[name], 0, *args)
        except NoScriptError:
            client.script_load(source(name))
            return client.evalsha(self._sha[name], 0, *args)
