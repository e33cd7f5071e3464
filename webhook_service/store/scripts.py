"""The Lua scripts, each loaded once with a preamble from ``keys.py``: the key table (``K``,
every key under the hash tag of the bucket the script runs in: the tag of its KEYS[1]),
the operational event types (``OPS_TYPES``), the log outbox's field names (``LOG``), the
final delivery states (``FINAL``), the lifetimes of the endpoint stats windows (``TTL``) and
the default application, which a script creates on its first use (``DEFAULT_APP``, from
``applications.py``), then common.lua's helpers. Each script is given only the parts it
names, and its key table only the templates it names (store/lua_link.py says why).

Every script is given at least one key, KEYS[1], one of its bucket's (a cluster client routes
the call by it), and builds every other key from ``K``: ``K.delivery .. id`` is the delivery's
key in that bucket. The caller makes sure each id it passes is of that bucket (``Args.keys``
in each wrapper). Only ratelimit.lua, one key of no bucket, uses its KEYS[1] alone.

Each script's first line is its shebang, which this moves above the preamble: ``#!lua``, or
``#!lua flags=allow-oom`` for the steps that carry work already accepted to its end (lease,
record, claim_due, release). At ``maxmemory`` the server refuses a plain ``#!lua`` script
before it writes anything, and runs an ``allow-oom`` one whole: a full store takes no new
work but still delivers, records and lets go of what it holds. Without a shebang the server
would decide by the script's first write command, which no one reading the script sees.

On a cluster, a bucket's slot may be moving to another primary (a reshard). A script's keys
other than KEYS[1] are built inside it, so the server cannot see them when the call comes:
on the source a key already moved fails the script part-way (its writes so far kept), and
on the target (after ASK) a key not moved yet reads as missing. So each call declares a
second key of its bucket that never exists (``keys.slot_guard``): for a call of several
keys the server answers TRYAGAIN, before running anything, while the slot is migrating or
importing, and the cluster client (store/connect.py) tries again until the move is over
(then MOVED takes the call to the new owner)."""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Iterable, Sequence
from functools import cache
from importlib.resources import files
from typing import Any, cast

from redis import Redis
from redis.asyncio import Redis as AsyncRedis
from redis.asyncio.client import Pipeline as AsyncPipeline
from redis.client import Pipeline
from redis.cluster import RedisCluster
from redis.exceptions import NoScriptError

from webhook_service.operations import OPERATIONAL_EVENT_TYPES
from webhook_service.store import keys
from webhook_service.store.applications import DEFAULT_APP_ID, DEFAULT_APP_NAME, DEFAULT_APP_UID
from webhook_service.store.connect import is_cluster
from webhook_service.store.lua_link import Definition, definitions, needed
from webhook_service.store.states import FINAL_STATUSES

# What a script's ARGV holds (redis-py encodes each).
ArgT = str | int | float

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
    "ops_emit",
    "schedule_cancel",
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


def guarded(script_keys: Sequence[str]) -> list[str]:
    """``script_keys`` and its bucket's slot guard (none for a key of no bucket, which is a
    script's only key: one key is routed by ASK alone)."""
    guard = keys.slot_guard(script_keys[0]) if script_keys else None
    return [*script_keys] if guard is None else [*script_keys, guard]


# K, from the tag of the script's KEYS[1], each name made on its first use in a call (most
# scripts use a few of the templates, and every call would pay for all of them); the parts
# of names (KP) are there from the start, as they are.
_K_TABLE = """local HEAD
local function bucket_head()
  if not HEAD then
    HEAD = string.match(KEYS[1] or '', HEAD_PATTERN)
    if not HEAD then return error('KEYS[1] is no key of a bucket: ' .. tostring(KEYS[1])) end
  end
  return HEAD
end
local K = setmetatable(KP, {__index = function(k, name)
  local rest = KT[name]
  if not rest then return error('no key template ' .. name) end
  local key = bucket_head() .. rest
  rawset(k, name, key)
  return key
end})
local function in_default_bucket() return bucket_head() == DEFAULT_HEAD end"""


# K's templates a script names (K.<name>): the only ones its KT holds.
_K_NAME = re.compile(r"\bK\.([A-Za-z_]\w*)")


def _key_table(names: Iterable[str]) -> str:
    templates = ", ".join(
        f"{name} = {_lua_string(keys.LUA_KEYS[name])}"
        for name in sorted(set(names))
        if name in keys.LUA_KEYS and name not in keys.LUA_PARTS
    )
    return f"local KT = {{{templates}}}"


@cache
def preamble() -> tuple[Definition, ...]:
    """Every definition a script may use: the tables made from keys.py and the rest, then
    common.lua's helpers. Each script links those it names (store/lua_link.py), and its KT
    holds only the key templates it names: a table is built anew on every call too."""
    # The parts of a name (an infix, a suffix) are K's as they are, under no head.
    parts = ", ".join(
        f"{field} = {_lua_string(keys.LUA_KEYS[field])}" for field in sorted(keys.LUA_PARTS)
    )
    ops = ", ".join(f"[{_lua_string(name)}] = true" for name in OPERATIONAL_EVENT_TYPES)
    # A bucket's head, as keys.head spells it: the prefix (its punctuation escaped) and tag.
    prefix = "".join(f"%{c}" if not c.isalnum() else c for c in keys.PREFIX)
    generated = (
        f"local HEAD_PATTERN = {_lua_string(f'^({prefix}{{b%d+}}:)')}",
        f"local DEFAULT_HEAD = {_lua_string(keys.head(keys.DEFAULT_BUCKET))}",
        _key_table(keys.LUA_KEYS),
        f"local KP = {{{parts}}}",
        _K_TABLE,
        f"local OPS_TYPES = {{{ops}}}",
        f"local LOG = {{{_outbox_fields()}}}",
        f"local FINAL = {{{_final()}}}",
        f"local TTL = {{{', '.join(f'{k} = {v}' for k, v in keys.WINDOW_TTL.items())}}}",
        f"local DEFAULT_APP = {{{_default_app()}}}",
    )
    common = (files("webhook_service.store") / "lua" / "common.lua").read_text()
    return tuple(definitions("\n".join((*generated, common))))


@cache
def source(name: str) -> str:
    shebang, body = (
        (files("webhook_service.store") / "lua" / f"{name}.lua").read_text().split("\n", 1)
    )
    if shebang not in SHEBANGS:
        raise ValueError(f"{name}.lua must begin with one of {SHEBANGS}, not {shebang!r}")
    linked = needed(preamble(), body)
    named = _K_NAME.findall("\n".join([*(d.text for d in linked), body]))
    texts = (_key_table(named) if d.name == "KT" else d.text for d in linked)
    return "\n".join((shebang, *texts, body))


class Scripts:
    """The scripts for one client, run by SHA and loaded again when the server has lost them
    (a restart, SCRIPT FLUSH). This is what redis-py's registered Script objects do, minus
    their per-call isinstance check against a typing Protocol class, which cost the API 6 %
    of its CPU under ingest load."""

    def __init__(self, client: AsyncRedis | Redis) -> None:
        self._client = client
        self._cluster = is_cluster(client)
        self._sha = {name: hashlib.sha1(source(name).encode()).hexdigest() for name in NAMES}  # noqa: S324 - Redis names scripts by SHA-1

    @property
    def async_client(self) -> AsyncRedis:
        return cast(AsyncRedis, self._client)

    @property
    def sync_client(self) -> Redis:
        return cast(Redis, self._client)

    async def run(self, name: str, script_keys: Sequence[str], args: Sequence[ArgT]) -> Any:
        """Run the script with ``script_keys`` as its KEYS (KEYS[1] names its bucket)."""
        script_keys = guarded(script_keys) if self._cluster else script_keys
        client = cast(AsyncRedis, self._client)
        try:
            return await client.evalsha(self._sha[name], len(script_keys), *script_keys, *args)
        except NoScriptError:
            await client.script_load(source(name))
            return await client.evalsha(self._sha[name], len(script_keys), *script_keys, *args)

    def run_sync(self, name: str, script_keys: Sequence[str], args: Sequence[ArgT]) -> Any:
        script_keys = guarded(script_keys) if self._cluster else script_keys
        client = cast(Redis, self._client)
        try:
            return client.evalsha(self._sha[name], len(script_keys), *script_keys, *args)
        except NoScriptError:
            client.script_load(source(name))
            return client.evalsha(self._sha[name], len(script_keys), *script_keys, *args)

    def run_many_sync(
        self, name: str, calls: Sequence[tuple[Sequence[str], Sequence[ArgT]]]
    ) -> list[Any]:
        """One call of the script per (keys, args), in one round trip (a pipeline, not a
        transaction: each call is its own atomic step, of its own bucket). A server that lost
        the script answers each call NOSCRIPT, having run none: it is loaded and those are
        sent again. The first call the server refused raises."""
        client = cast(Redis, self._client)
        if isinstance(client, RedisCluster):
            # redis-py's cluster pipeline runs no script: a call each, each to its node.
            return [self.run_sync(name, script_keys, args) for script_keys, args in calls]
        replies: list[Any] = [None] * len(calls)
        todo = list(range(len(calls)))
        for _ in range(2):
            with client.pipeline(transaction=False) as pipe:
                self._queue(pipe, name, calls, todo)
                todo = _placed(todo, pipe.execute(raise_on_error=False), replies)
            if not todo:
                for reply in replies:
                    if isinstance(reply, Exception):
                        raise reply
                return replies
            client.script_load(source(name))
        raise NoScriptError(f"{name}: the server lost the script again while it was loaded")

    async def run_many(
        self, name: str, calls: Sequence[tuple[Sequence[str], Sequence[ArgT]]]
    ) -> list[Any]:
        """run_many_sync's round trip on the async client, except that a call the server
        refused leaves its error in its place, for its own caller (store/batch.py), and the
        others' replies stand. A lost connection raises for all."""
        if self._cluster:
            # As in run_many_sync, a call each; at once, and each to its node.
            return list(
                await asyncio.gather(
                    *(self.run(name, k, a) for k, a in calls), return_exceptions=True
                )
            )
        client = cast(AsyncRedis, self._client)
        replies: list[Any] = [None] * len(calls)
        todo = list(range(len(calls)))
        for _ in range(2):
            async with client.pipeline(transaction=False) as pipe:
                self._queue(pipe, name, calls, todo)
                todo = _placed(todo, await pipe.execute(raise_on_error=False), replies)
            if not todo:
                return replies
            await client.script_load(source(name))
        raise NoScriptError(f"{name}: the server lost the script again while it was loaded")

    def _queue(
        self,
        pipe: Pipeline | AsyncPipeline,
        name: str,
        calls: Sequence[tuple[Sequence[str], Sequence[ArgT]]],
        todo: Sequence[int],
    ) -> None:
        sha = self._sha[name]
        for i in todo:
            script_keys, args = calls[i]
            pipe.evalsha(sha, len(script_keys), *script_keys, *args)


def _placed(todo: Sequence[int], answers: Sequence[Any], replies: list[Any]) -> list[int]:
    """Each answer of the calls ``todo`` in its place in ``replies``; returns the calls the
    server answered NOSCRIPT (it ran none of them), to be sent again."""
    missing = []
    for i, answer in zip(todo, answers, strict=True):
        if isinstance(answer, NoScriptError):
            missing.append(i)
        else:
            replies[i] = answer
    return missing
