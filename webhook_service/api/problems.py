"""RFC 9457 problem details: every error the API gives is one of these."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import orjson
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from pydantic import ValidationError
from yarl import URL

from webhook_service.history.reader import LogUnavailable
from webhook_service.log_window import LineWindow
from webhook_service.store.refusals import MEANING, REFUSALS, Refusal, classify

log = logging.getLogger(__name__)

PROBLEM_TYPE_BASE = "https://webhook-service.dev/problems/"
CONTENT_TYPE = "application/problem+json"
REDIS_DOWN_RETRY_AFTER = "5"
LOG_DOWN_RETRY_AFTER = "5"
# A history read that fails while the log's database is away: one line a minute says so.
_log_away = LineWindow()

_TITLES = {
    400: "Malformed request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not found",
    405: "Method not allowed",
    408: "Request timeout",
    409: "Conflict",
    413: "Payload too large",
    414: "URI too long",
    415: "Unsupported media type",
    422: "Validation failed",
    429: "Too many requests",
    431: "Request header fields too large",
    500: "Internal error",
    503: "Service unavailable",
}


class ProblemError(Exception):
    def __init__(
        self,
        status: int,
        detail: str,
        *,
        kind: str | None = None,
        errors: Sequence[Mapping[str, str]] = (),
        headers: Mapping[str, str] | None = None,
        close: bool = False,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.kind = kind or _TITLES.get(status, "error").lower().replace(" ", "-")
        self.errors = list(errors)
        self.headers = dict(headers or {})
        # The connection cannot serve another request (a body left half-read): end it.
        self.close = close

    def response(self, instance: str) -> web.Response:
        body: dict[str, Any] = {
            "type": PROBLEM_TYPE_BASE + self.kind,
            "title": _TITLES.get(self.status, "Error"),
            "status": self.status,
            "detail": self.detail,
            "instance": instance,
        }
        if self.errors:
            body["errors"] = self.errors
        response = web.Response(
            status=self.status,
            body=orjson.dumps(body),
            content_type=CONTENT_TYPE,
            headers=self.headers,
        )
        if self.close:
            response.force_close()
        return response


def pointer(location: Sequence[int | str]) -> str:
    """A JSON Pointer (RFC 6901) to the offending field."""
    parts = [str(p).replace("~", "~0").replace("/", "~1") for p in location]
    return "/" + "/".join(parts) if parts else ""


def from_validation(exc: ValidationError, prefix: Sequence[str] = ()) -> ProblemError:
    errors = [
        {"pointer": pointer([*prefix, *err["loc"]]), "detail": err["msg"]}
        for err in exc.errors(include_url=False)
    ]
    return ProblemError(422, "The request does not match the schema.", errors=errors)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def client_error(exc: BaseException | None) -> tuple[int, str] | None:
    """The status and kind (an aiohttp exception's class name) of a client's broken HTTP,
    or None when ``exc`` is not the client's fault. Broken HTTP: a request aiohttp could not
    parse, or a body it could not decode (bad chunking, a Content-Encoding the bytes are not
    in, broken multipart). Never the exception's message, which quotes the client's bytes."""
    if isinstance(exc, web.RequestPayloadError):
        # The body's parser wraps what it found; that names the kind.
        cause = exc.__cause__
        return 400, type(cause if cause is not None else exc).__name__
    if isinstance(exc, HttpProcessingError) and 400 <= exc.code < 500:
        return exc.code, type(exc).__name__
    return None


@web.middleware
async def problem_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every error leaves as a problem document: no route can reach aiohttp's own
    plain-text 500 page, whatever it raises."""
    try:
        return await handler(request)
    except ProblemError as exc:
        return exc.response(_instance(request))
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        problem = ProblemError(exc.status, exc.reason, headers=_allowed(exc))
        return problem.response(_instance(request))
    except Exception as exc:  # each kind is answered in _answer_for; the rest is a 500
        return _answer_for(request, exc).response(_instance(request))


def _answer_for(request: web.Request, exc: Exception) -> ProblemError:
    found = client_error(exc)
    if found is not None:
        # A body the handler could not read as sent (see ``client_error``): the client's
        # error. The rest of the body cannot be read either, so nothing after it on the
        # connection.
        return ProblemError(found[0], "The request body could not be read as sent.", close=True)
    refusal = classify(exc)
    if refusal is not None:
        REFUSALS.note(refusal, exc, f"serving {request.method} {_route(request)}")
        return _store_unavailable(refusal)
    if isinstance(exc, LogUnavailable):
        return _log_unavailable(request, exc)
    log.error("unexpected error serving %s %s", request.method, _route(request), exc_info=exc)
    return ProblemError(
        500, "Something went wrong on our side; it has been logged.", kind="internal-error"
    )


def _store_unavailable(refusal: Refusal) -> ProblemError:
    if refusal in (Refusal.CONNECTION, Refusal.TIMEOUT):
        # The command may have been sent before the connection failed: only an
        # Idempotency-Key tells a retried event from a new one.
        outcome = "a write may have taken effect: retry with the same Idempotency-Key"
    else:
        outcome = "nothing was changed: retry"
    return ProblemError(
        503,
        f"The event store refused the request ({MEANING[refusal]}); {outcome} after "
        "Retry-After seconds.",
        kind="store-unavailable",
        headers={"Retry-After": REDIS_DOWN_RETRY_AFTER},
    )


def _log_unavailable(request: web.Request, exc: LogUnavailable) -> ProblemError:
    left_out = _log_away.admit("log")
    if left_out is not None:
        more = f"; {left_out} more since the last such line" if left_out else ""
        log.warning(
            "serving %s %s: the delivery log cannot be read (%s)%s",
            request.method, _route(request), exc, more,
        )  # fmt: skip
    return ProblemError(
        503,
        "The delivery log's database cannot be read now; retry after Retry-After seconds. "
        "Delivery goes on, and what is still in flight is read by its id.",
        kind="log-unavailable",
        headers={"Retry-After": LOG_DOWN_RETRY_AFTER},
    )


def _route(request: web.Request) -> str:
    """The route's template (``/v1/events/{event_id}``): no id, nothing the client chose."""
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else "(no route)"


def _instance(request: web.Request) -> str:
    # The decoded path may hold characters no URI reference can (spaces, '<', non-ASCII):
    # encode it again rather than echo what the caller sent.
    return URL.build(path=request.path).raw_path


def _allowed(exc: web.HTTPException) -> dict[str, str]:
    allow = exc.headers.get("Allow")
    return {"Allow": allow} if allow else {}
