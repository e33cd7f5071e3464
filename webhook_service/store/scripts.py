"""The Lua scripts, as the functions of one Valkey library (FUNCTION LOAD, then FCALL).

The library holds, once, a preamble made from ``keys.py``: the key templates (``KT``, and the
parts of names, ``KP``), the operational event types (``OPS_TYPES``), the log outbox's field
names (``LOG``), the final delivery states (``FINAL``), the lifetimes of the endpoint stats
windows (``TTL``) and the default application, which a script creates on its first use
(``DEFAULT_APP``, from ``applications.py``); then common.lua's helpers; then each script of
``NAMES`` as a function. Valkey runs a library's top level once, when it loads it, where
EVALSHA runs a script's whole text, its preamble included, on every call: each helper a
closure made anew, each table built anew (docs/benchmarks.md, issue 21's fourth pass).

Every script is given at least one key, KEYS[1], one of its bucket's (a cluster client routes
the call by it), and builds every other key from ``K``: ``K.delivery .. id`` is the delivery's
key in that bucket. Each function starts by binding ``K`` to its KEYS[1]'s bucket (the
library's ``bind``); a bucket's table is made on its first call and kept, as its names are
the same on every call. The caller makes sure each id it passes is of that bucket
(``Args.keys`` in each wrapper). Only ratelimit.lua, one key of no bucket, uses its KEYS[1]
alone.

Each script's first line is its flags, in the shebang form EVAL reads: ``#!lua``, or
``#!lua flags=allow-oom`` for the steps that carry work already accepted to its end (lease,
record, claim_due, release). At ``maxmemory`` the server refuses a function without
``allow-oom`` before it writes anything, and runs an ``allow-oom`` one whole: a full store
takes no new work but still delivers, records and lets go of what it holds.

The library's name, and each function's, end in a digest of the library's text: processes
of two releases (a rolling restart) share a server, each calling its own functions. A
server without them (new, flushed, or a primary added to a cluster) answers "Function not
found" having run nothing; the library is loaded (on every primary of a cluster) and the
call sent again, as redis-py does for a script on NOSCRIPT. Loading is a write: at
``maxmemory`` it is refused, so a release's first process should start before the store
fills (every later one finds the library loaded; it lives in the AOF, and replicas and a
promoted replica have it).

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from typing import Any, cast

from redis import Redis
from redis.asyncio import Redis as AsyncRedis
from redis.asyncio.client import Pipeline as AsyncPipeline
from redis.client import Pipeline
from redis.cluster import RedisCluster
from redis.exceptions import ResponseError

from webhook_service.operations import OPERATIONAL_EVENT_TYPES
from webhook_service.store import keys
from webhook_service.store.applications import DEFAULT_APP_ID, DEFAULT_APP_NAME, DEFAULT_APP_UID
from webhook_service.store.connect import is_cluster, primaries
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

# A script's first line, and the flags its function is registered with.
FLAGS = {"#!lua": (), "#!lua flags=allow-oom": ("allow-oom",)}


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


def guarded(script_keys: Sequence[str]) -> list[str]:
    """``script_keys`` and its bucket's slot guard (none for a key of no bucket, which is a
    script's only key: one key is routed by ASK alone)."""
    guard = keys.slot_guard(script_keys[0]) if script_keys else None
    return [*script_keys] if guard is None else [*script_keys, guard]


# K, the key table of the call's bucket (bind, as each function starts): a bucket's table is
# made on its first call and each name in it on its first use, then kept with the library
# (64 buckets, a few dozen names each). The parts of names (KP) are every table's as they
# are; a call whose KEYS[1] is of no bucket gets them alone. (A library's top level, run
# when it is loaded, sees no global but ``redis``: each setmetatable waits for a call.)
_K_TABLE = """local HEAD, K, NO_BUCKET
local K_OF = {}
local function key_table(head)
  return setmetatable({}, {__index = function(k, name)
    local key = KP[name]
    if not key then
      local rest = KT[name]
      if not rest then return error('no key template ' .. name) end
      key = head .. rest
    end
    rawset(k, name, key)
    return key
  end})
end
local function bind(keys)
  HEAD = string.match(keys[1] or '', HEAD_PATTERN)
  if not HEAD then
    NO_BUCKET = NO_BUCKET or setmetatable({}, {__index = function(_, name)
      return KP[name] or error('KEYS[1] is of no bucket, so there is no K.' .. name)
    end})
    K = NO_BUCKET
    return
  end
  K = K_OF[HEAD]
  if not K then
    K = key_table(HEAD)
    K_OF[HEAD] = K
  end
end
local function in_default_bucket() return HEAD == DEFAULT_HEAD end"""


@cache
def preamble() -> str:
    """What every function shares: the tables made from keys.py and the rest, then
    common.lua's helpers."""
    templates = ", ".join(
        f"{name} = {_lua_string(value)}"
        for name, value in sorted(keys.LUA_KEYS.items())
        if name not in keys.LUA_PARTS
    )
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
        f"local KT = {{{templates}}}",
        f"local KP = {{{parts}}}",
        _K_TABLE,
        f"local OPS_TYPES = {{{ops}}}",
        f"local LOG = {{{_outbox_fields()}}}",
        f"local FINAL = {{{_final()}}}",
        f"local TTL = {{{', '.join(f'{k} = {v}' for k, v in keys.WINDOW_TTL.items())}}}",
        f"local DEFAULT_APP = {{{_default_app()}}}",
    )
    common = (files("webhook_service.store") / "lua" / "common.lua").read_text()
    return "\n".join((*generated, common))


def script(name: str) -> tuple[tuple[str, ...], str]:
    """A script's flags and its text below its first line."""
    first, body = (
        (files("webhook_service.store") / "lua" / f"{name}.lua").read_text().split("\n", 1)
    )
    if first not in FLAGS:
        raise ValueError(f"{name}.lua must begin with one of {tuple(FLAGS)}, not {first!r}")
    return FLAGS[first], body


# The hex digits of the digest that ends a library's name; only names of that form are ours.
_DIGEST_LENGTH = 16
_LIBRARY_NAME = re.compile(f"webhook_[0-9a-f]{{{_DIGEST_LENGTH}}}")


@dataclass(frozen=True)
class Library:
    name: str
    code: str  # what FUNCTION LOAD takes
    functions: Mapping[str, str]  # each script's function


@cache
def library() -> Library:
    scripts = {name: script(name) for name in NAMES}
    text = "\n".join((preamble(), *(f"{flags}\n{body}" for flags, body in scripts.values())))
    digest = hashlib.sha1(text.encode()).hexdigest()[:_DIGEST_LENGTH]  # noqa: S324 - a name
    functions = {name: f"webhook_{name}_{digest}" for name in NAMES}
    registered = (
        f"redis.register_function{{function_name = '{functions[name]}', "
        f"flags = {{{', '.join(_lua_string(f) for f in flags)}}}, "
        f"callback = function(KEYS, ARGV)\nbind(KEYS)\n{body}\nend}}"
        for name, (flags, body) in scripts.items()
    )
    name = f"webhook_{digest}"
    return Library(name, "\n".join((f"#!lua name={name}", preamble(), *registered)), functions)


def drop_other_releases(client: Redis) -> list[str]:
    """Delete the libraries of other releases from the server (each primary of a cluster);
    returns their names. A scheduler does this as it starts, so a server keeps no release's
    library long after its processes are gone. A process of that release still running
    loads its library again on its next call, as on any server without it, and the next
    scheduler to start deletes it again (a call fails only if the delete falls between its
    load and its resend). Only names ours take are touched: a library of another
    application on the same server is left alone."""
    ours = library().name
    dropped = set()
    for node in primaries(client):
        for entry in node.function_list(library="webhook_*"):
            fields = dict(zip(entry[::2], entry[1::2], strict=True))
            name = fields.get("library_name", fields.get(b"library_name"))
            name = name.decode() if isinstance(name, bytes) else str(name)
            if name != ours and _LIBRARY_NAME.fullmatch(name):
                node.function_delete(name)
                dropped.add(name)
    return sorted(dropped)


def _lost(answer: object) -> bool:
    """The server's answer to a call of a function it does not have (it ran nothing)."""
    return isinstance(answer, ResponseError) and str(answer).startswith("Function not found")


class Scripts:
    """The scripts for one client, each called by its function's name, and the library loaded
    again when the server does not have it."""

    def __init__(self, client: AsyncRedis | Redis) -> None:
        self._client = client
        self._cluster = is_cluster(client)
        self._functions = library().functions

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
        function = self._functions[name]
        try:
            return await client.fcall(function, len(script_keys), *script_keys, *args)
        except ResponseError as exc:
            if not _lost(exc):
                raise
            await client.function_load(library().code, replace=True)
            return await client.fcall(function, len(script_keys), *script_keys, *args)

    def run_sync(self, name: str, script_keys: Sequence[str], args: Sequence[ArgT]) -> Any:
        script_keys = guarded(script_keys) if self._cluster else script_keys
        client = cast(Redis, self._client)
        function = self._functions[name]
        try:
            return client.fcall(function, len(script_keys), *script_keys, *args)
        except ResponseError as exc:
            if not _lost(exc):
                raise
            client.function_load(library().code, replace=True)
            return client.fcall(function, len(script_keys), *script_keys, *args)

    def run_many_sync(
        self, name: str, calls: Sequence[tuple[Sequence[str], Sequence[ArgT]]]
    ) -> list[Any]:
        """One call of the script per (keys, args), in one round trip (a pipeline, not a
        transaction: each call is its own atomic step, of its own bucket). A server without
        the library answers each call "Function not found", having run none: it is loaded
        and those are sent again. The first call the server refused raises."""
        client = cast(Redis, self._client)
        if isinstance(client, RedisCluster):
            # redis-py's cluster pipeline runs no function: a call each, each to its node.
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
            client.function_load(library().code, replace=True)
        raise ResponseError(f"{name}: the server lost the library again while it was loaded")

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
            await client.function_load(library().code, replace=True)
        raise ResponseError(f"{name}: the server lost the library again while it was loaded")

    def _queue(
        self,
        pipe: Pipeline | AsyncPipeline,
        name: str,
        calls: Sequence[tuple[Sequence[str], Sequence[ArgT]]],
        todo: Sequence[int],
    ) -> None:
        function = self._functions[name]
        for i in todo:
            script_keys, args = calls[i]
            pipe.fcall(function, len(script_keys), *script_keys, *args)


def _placed(todo: Sequence[int], answers: Sequence[Any], replies: list[Any]) -> list[int]:
    """Each answer of the calls ``todo`` in its place in ``replies``; returns the calls the
    server answered "Function not found" (it ran none of them), to be sent again."""
    missing = []
    for i, answer in zip(todo, answers, strict=True):
        if _lost(answer):
            missing.append(i)
        else:
            replies[i] = answer
    return missing
