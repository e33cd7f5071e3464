"""Reading a JSON request body: type, size, syntax and shape checked before any model sees it.

Shape limits (nesting depth, object keys) bound the work a small body can cause: 256 KiB of
``[[[[…`` or ``{"a":0,…`` is cheap to send and costly to walk, store and re-serialise.
"""

from __future__ import annotations

from typing import Any, TypeVar

import orjson
from aiohttp import web
from pydantic import BaseModel, ValidationError

from webhook_service.api.context import services
from webhook_service.api.problems import ProblemError, from_validation, pointer

Model = TypeVar("Model", bound=BaseModel)


_UTF8 = frozenset({"utf-8", "utf8"})


async def read_json(request: web.Request, max_bytes: int) -> tuple[Any, bytes]:
    if request.content_type != "application/json":
        raise ProblemError(415, "Send the body as application/json.")
    if request.charset is not None and request.charset.lower() not in _UTF8:
        raise ProblemError(415, "JSON bodies must be UTF-8 (charset=utf-8 or none).")
    if request.content_length is not None and request.content_length > max_bytes:
        raise ProblemError(413, f"The body is larger than {max_bytes} bytes.")
    raw = await request.content.read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise ProblemError(413, f"The body is larger than {max_bytes} bytes.")
    settings = services(request).settings
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if str(exc).startswith("depth limit exceeded"):
            # orjson's own ceiling (1024) is far above ours: the same answer as ours.
            raise _too_deep(settings.max_json_depth, []) from None
        raise ProblemError(400, f"The body is not valid JSON: {exc}.") from None
    check_shape(parsed, settings.max_json_depth, settings.max_json_keys)
    return parsed, raw


def _too_deep(max_depth: int, location: list[str | int]) -> ProblemError:
    return ProblemError(
        422,
        f"The body nests objects and arrays more than {max_depth} levels deep.",
        kind="json-too-deep",
        errors=[{"pointer": pointer(location), "detail": f"deeper than {max_depth} levels"}],
    )


def check_shape(value: Any, max_depth: int, max_keys: int) -> None:
    """Refuse JSON nested deeper than ``max_depth`` or with more than ``max_keys`` object
    keys in all. Iterative, so no depth can exhaust Python's stack."""
    keys = 0
    pending: list[tuple[Any, int, list[str | int]]] = [(value, 1, [])]
    while pending:
        node, depth, location = pending.pop()
        if isinstance(node, dict):
            items: Any = node.items()
            keys += len(node)
        elif isinstance(node, list):
            items = enumerate(node)
        else:
            continue
        if depth > max_depth:
            raise _too_deep(max_depth, location)
        if keys > max_keys:
            raise ProblemError(
                422,
                f"The body has more than {max_keys} object keys in all.",
                kind="json-too-many-keys",
                errors=[{"pointer": "", "detail": f"more than {max_keys} keys"}],
            )
        for name, child in items:
            if isinstance(child, dict | list):
                pending.append((child, depth + 1, [*location, name]))


async def read_model(request: web.Request, model: type[Model], max_bytes: int) -> Model:
    parsed, _ = await read_json(request, max_bytes)
    return validate(model, parsed)


def validate(model: type[Model], parsed: Any) -> Model:
    try:
        return model.model_validate(parsed)
    except ValidationError as exc:
        raise from_validation(exc) from None
