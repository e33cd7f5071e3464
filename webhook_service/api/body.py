"""Reading a JSON request body: type, size and syntax checked before any model sees it."""

from __future__ import annotations

from typing import Any, TypeVar

import orjson
from aiohttp import web
from pydantic import BaseModel, ValidationError

from webhook_service.api.problems import ProblemError, from_validation

Model = TypeVar("Model", bound=BaseModel)


async def read_json(request: web.Request, max_bytes: int) -> tuple[Any, bytes]:
    if request.content_type != "application/json":
        raise ProblemError(415, "Send the body as application/json.")
    if request.content_length is not None and request.content_length > max_bytes:
        raise ProblemError(413, f"The body is larger than {max_bytes} bytes.")
    raw = await request.content.read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise ProblemError(413, f"The body is larger than {max_bytes} bytes.")
    try:
        return orjson.loads(raw), raw
    except orjson.JSONDecodeError as exc:
        raise ProblemError(400, f"The body is not valid JSON: {exc}.") from None


async def read_model(request: web.Request, model: type[Model], max_bytes: int) -> Model:
    parsed, _ = await read_json(request, max_bytes)
    return validate(model, parsed)


def validate(model: type[Model], parsed: Any) -> Model:
    try:
        return model.model_validate(parsed)
    except ValidationError as exc:
        raise from_validation(exc) from None
