"""Per-request limits: header sizes, and requests in flight per API key.

Header limits: ours answer 431 (or 414) in problem+json; aiohttp's parser is the backstop.

aiohttp parses the request line and headers before any middleware runs, and answers a line
or a header count over its own limits with a bare text/plain 400 that no middleware can
shape. So the parser's limits are set at twice ours: a request within them reaches this
middleware, which holds it to ours and answers in problem+json; only a request more than
twice over gets the parser's plain answer (and costs us at most twice the memory).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from aiohttp import web

from webhook_service.api.auth import CALLER_KEY_ID
from webhook_service.api.context import services
from webhook_service.api.problems import Handler, ProblemError
from webhook_service.config import Settings

# "METHOD SP target SP HTTP/1.1 CRLF" around the method and target; "name: value CRLF".
_REQUEST_LINE_OVERHEAD = 11
_HEADER_LINE_OVERHEAD = 4


def parser_limits(settings: Settings) -> dict[str, Any]:
    """The keyword arguments for aiohttp's request handler (``handler_args``)."""
    line = 2 * settings.max_header_bytes
    return {"max_line_size": line, "max_field_size": line, "max_headers": 2 * settings.max_headers}


@web.middleware
async def header_limits_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    settings = services(request).settings
    limit = settings.max_header_bytes
    if len(request.raw_path) > limit:
        raise ProblemError(414, f"The request target is longer than {limit} bytes.")
    headers = request.raw_headers
    if len(headers) > settings.max_headers:
        raise ProblemError(431, f"The request has more than {settings.max_headers} headers.")
    size = len(request.method) + len(request.raw_path) + _REQUEST_LINE_OVERHEAD
    size += sum(len(name) + len(value) + _HEADER_LINE_OVERHEAD for name, value in headers)
    if size > limit:
        raise ProblemError(431, f"The request line and headers exceed {limit} bytes.")
    return await handler(request)


class InFlight:
    """Requests in flight per API key, in this process: one key holding many slow requests
    (a body trickled in, a costly page) cannot take the whole event loop from the others."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._counts: Counter[str] = Counter()

    def enter(self, key_id: str) -> bool:
        if self._counts[key_id] >= self.limit:
            return False
        self._counts[key_id] += 1
        return True

    def leave(self, key_id: str) -> None:
        self._counts[key_id] -= 1
        if self._counts[key_id] <= 0:
            del self._counts[key_id]  # the counter holds only keys with requests in flight


IN_FLIGHT = web.AppKey("in_flight", InFlight)


@web.middleware
async def key_concurrency_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """After authentication, before the body is read: the slot is the caller's key's."""
    key_id = request.get(CALLER_KEY_ID)
    if key_id is None:
        return await handler(request)  # no key: health, the dashboard's own pages, 404s
    in_flight = request.app[IN_FLIGHT]
    if not in_flight.enter(key_id):
        raise ProblemError(
            429,
            f"This API key already has {in_flight.limit} requests in flight here; retry "
            "once one has finished.",
            kind="too-many-concurrent-requests",
            headers={"Retry-After": "1"},
        )
    try:
        return await handler(request)
    finally:
        in_flight.leave(key_id)
