"""Cursor paging parameters shared by every list route."""

from __future__ import annotations

from aiohttp import web

from webhook_service.api.problems import ProblemError

DEFAULT_LIMIT = 50
MAX_LIMIT = 250


def query_problem(parameter: str, detail: str) -> ProblemError:
    return ProblemError(
        422,
        f"The query parameter '{parameter}' is not valid.",
        errors=[{"pointer": f"#/query/{parameter}", "detail": detail}],
    )


def limit_param(request: web.Request, default: int, maximum: int) -> int:
    raw = request.query.get("limit", str(default))
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= maximum:
        raise query_problem("limit", f"an integer from 1 to {maximum}")
    return int(raw)


def page_params(request: web.Request) -> tuple[int, str | None]:
    limit = limit_param(request, DEFAULT_LIMIT, MAX_LIMIT)
    cursor = request.query.get("cursor") or None
    if cursor is not None and (len(cursor) > 128 or not cursor.isascii()):
        raise query_problem("cursor", "a cursor returned as next_cursor")
    return limit, cursor
