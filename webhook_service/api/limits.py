"""Header limits: ours answer 431 (or 414) in problem+json; aiohttp's parser is the backstop.

aiohttp parses the request line and headers before any middleware runs, and answers a line
or a header count over its own limits with a bare text/plain 400 that no middleware can
shape. So the parser's limits are set at twice ours: a request within them reaches this
middleware, which holds it to ours and answers in problem+json; only a request more than
twice over gets the parser's plain answer (and costs us at most twice the memory).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

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
