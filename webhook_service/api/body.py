"""Reading a request body: read whole, in bounded time and size; for JSON, type, syntax and
shape checked before any model sees it.

A body arrives in as many pieces as the network cut it into: it is read to its end
(``Content-Length``, or the last chunk), never only as far as it has arrived. A client that
stops sending mid-body is cut off after ``WEBHOOK_BODY_TIMEOUT`` with a 408.

Shape limits (nesting depth, object keys, nodes in all) bound the work a small body can
cause: 256 KiB of ``[[[[…``, ``{"a":0,…`` or ``[{},{},…`` is cheap to send and costly to
walk, validate, store and re-serialise.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import parse_qsl

import orjson
from aiohttp import web
from multidict import MultiDict, MultiDictProxy
from pydantic import BaseModel, ValidationError

from webhook_service.api.context import services
from webhook_service.api.problems import ProblemError, from_validation, pointer
from webhook_service.config import Settings

Model = TypeVar("Model", bound=BaseModel)


_UTF8 = frozenset({"utf-8", "utf8"})


async def read_json(request: web.Request, max_bytes: int) -> tuple[Any, bytes]:
    if request.content_type != "application/json":
        raise ProblemError(415, "Send the body as application/json.")
    if request.charset is not None and request.charset.lower() not in _UTF8:
        raise ProblemError(415, "JSON bodies must be UTF-8 (charset=utf-8 or none).")
    raw = await read_body(request, max_bytes)
    settings = services(request).settings
    limits = ShapeLimits.of(settings)
    check_containers(raw, limits)
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if str(exc).startswith("depth limit exceeded"):
            # orjson's own ceiling (1024) is far above ours: the same answer as ours.
            raise _too_deep(settings.max_json_depth, []) from None
        raise ProblemError(400, f"The body is not valid JSON: {exc}.") from None
    check_shape(parsed, limits)
    return parsed, raw


_FORM_TYPE = "application/x-www-form-urlencoded"
# The dashboard's forms hold a few short fields (a key, a token, a choice); the sign-in form
# is open to anyone, so what it may make us buffer stays small.
FORM_MAX_BYTES = 4096
_FORM = web.RequestKey("form", MultiDictProxy[str])


async def read_form(request: web.Request, max_bytes: int = FORM_MAX_BYTES) -> MultiDictProxy[str]:
    """An HTML form's fields, from a body read whole like any other (aiohttp's own
    ``request.post()`` waits for it without a time limit). Read once per request."""
    if _FORM in request:
        return request[_FORM]
    if request.content_type != _FORM_TYPE:
        raise ProblemError(415, f"Send the form as {_FORM_TYPE}.")
    raw = await read_body(request, max_bytes)
    try:
        fields = parse_qsl(raw.decode(), keep_blank_values=True)
    except UnicodeDecodeError:
        raise ProblemError(400, "The form is not UTF-8.") from None
    form = MultiDictProxy(MultiDict(fields))
    request[_FORM] = form
    return form


async def read_body(request: web.Request, max_bytes: int) -> bytes:
    """The whole body, or a problem: 413 past ``max_bytes`` (announced or counted as it
    comes), 408 when it does not arrive within the body timeout, 400 when it ends early."""
    declared = request.content_length
    if declared is not None and declared > max_bytes:
        raise _too_large(max_bytes)
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(services(request).settings.body_timeout):
            while chunk := await request.content.readany():
                size += len(chunk)
                if size > max_bytes:
                    raise _too_large(max_bytes)
                chunks.append(chunk)
    except TimeoutError:
        raise ProblemError(
            408,
            "The body did not arrive in time; send it whole, without pauses.",
            kind="body-timeout",
            close=True,
        ) from None
    if declared is not None and size != declared:
        raise ProblemError(400, f"The body ended after {size} of {declared} bytes.")
    return b"".join(chunks)


def _too_large(max_bytes: int) -> ProblemError:
    return ProblemError(413, f"The body is larger than {max_bytes} bytes.")


@dataclass(frozen=True)
class ShapeLimits:
    depth: int  # nesting levels of objects and arrays
    keys: int  # object keys, over the whole body
    nodes: int  # values of any kind, containers and scalars, over the whole body

    @classmethod
    def of(cls, settings: Settings) -> ShapeLimits:
        return cls(settings.max_json_depth, settings.max_json_keys, settings.max_json_nodes)


# A JSON string, escapes and all: what to blank out before counting brackets.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')


def check_containers(raw: bytes, limits: ShapeLimits) -> None:
    """Refuse, before parsing, a body with more objects and arrays than ``limits`` allows
    values: parsing 80 000 empty objects alone takes 15-30 ms of the event loop, refusing
    them here about 1 ms. Brackets are counted in C; only when there are that many, strings
    (where brackets mean nothing) are blanked out and they are counted again, exactly. (A
    256 KiB body of strings full of brackets and escapes costs the most: about 10 ms.)"""
    if raw.count(b"{") + raw.count(b"[") <= limits.nodes:
        return
    structure = _STRING.sub(b"", raw)
    if structure.count(b"{") + structure.count(b"[") > limits.nodes:
        raise _too_many("json-too-many-nodes", limits.nodes, "values")


def check_shape(value: Any, limits: ShapeLimits) -> None:
    """Refuse JSON deeper, with more object keys or with more values than ``limits``.

    Walked a level at a time, counting a container's children by its length before looking
    at any of them: the work is bounded by the limits, not by the body (80 000 empty objects
    in one array are refused at the array, without a step into it), and no depth can
    exhaust Python's stack.
    """
    nodes, keys, depth = 1, 0, 1
    level = [value] if type(value) in _CONTAINERS else []
    while level:
        below: list[Any] = []
        for node in level:
            nodes += len(node)
            if type(node) is dict:
                keys += len(node)
                children = node.values()
            else:
                children = node
            if nodes > limits.nodes:
                raise _too_many("json-too-many-nodes", limits.nodes, "values")
            if keys > limits.keys:
                raise _too_many("json-too-many-keys", limits.keys, "object keys")
            inner = [child for child in children if type(child) in _CONTAINERS]
            if inner:
                if depth >= limits.depth:
                    raise _too_deep(limits.depth, _path_deeper_than(value, limits.depth))
                # Empty ones hold nothing more to count: they are not walked (filter is C).
                below.extend(filter(None, inner))
        level = below
        depth += 1


# orjson makes only these two containers; exact types are cheaper to test than isinstance.
_CONTAINERS = frozenset({dict, list})


def _path_deeper_than(value: Any, max_depth: int) -> list[str | int]:
    """Where the first container below ``max_depth`` levels sits: walked only to report a
    refusal, over a body already known to be within the node limit."""
    pending: list[tuple[Any, list[str | int]]] = [(value, [])]
    while pending:
        node, location = pending.pop()
        if len(location) >= max_depth:
            return location
        items = node.items() if type(node) is dict else enumerate(node)
        pending.extend(
            (child, [*location, name]) for name, child in items if type(child) in _CONTAINERS
        )
    return []


def _too_deep(max_depth: int, location: list[str | int]) -> ProblemError:
    return ProblemError(
        422,
        f"The body nests objects and arrays more than {max_depth} levels deep.",
        kind="json-too-deep",
        errors=[{"pointer": pointer(location), "detail": f"deeper than {max_depth} levels"}],
    )


def _too_many(kind: str, limit: int, what: str) -> ProblemError:
    return ProblemError(
        422,
        f"The body has more than {limit} {what} in all.",
        kind=kind,
        errors=[{"pointer": "", "detail": f"more than {limit} {what}"}],
    )


async def read_model(request: web.Request, model: type[Model], max_bytes: int) -> Model:
    parsed, _ = await read_json(request, max_bytes)
    return validate(model, parsed)


def validate(model: type[Model], parsed: Any) -> Model:
    try:
        return model.model_validate(parsed)
    except ValidationError as exc:
        raise from_validation(exc) from None
