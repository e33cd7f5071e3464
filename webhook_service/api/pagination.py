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


def page_params(request: web.Request) -> tuple[int, str | None]:
    raw = request.query.get("limit", str(DEFAULT_LIMIT))
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= MAX_LIMIT:
        raise query_problem("limit", f"an integer from 1 to {MAX_LIMIT}")
    cursor = request.query.get("cursor") or None
    if cursor is not None and (len(cursor) > 128 or not cursor.isascii()):
        raise query_problem("cursor", "a cursor returned as next_cursor")
    return int(raw), cursor
