"""RFC 9457 problem details: every error the API gives is one of these."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import orjson
import redis.exceptions
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from pydantic import ValidationError
from yarl import URL

PROBLEM_TYPE_BASE = "https://webhook-service.dev/problems/"
CONTENT_TYPE = "application/problem+json"
REDIS_DOWN_RETRY_AFTER = "5"

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
    try:
        return await handler(request)
    except ProblemError as exc:
        return exc.response(_instance(request))
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        problem = ProblemError(exc.status, exc.reason, headers=_allowed(exc))
        return problem.response(_instance(request))
    except (HttpProcessingError, web.RequestPayloadError) as exc:
        return _unreadable(request, exc)
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
            redis.exceptions.BusyLoadingError, redis.exceptions.ReadOnlyError):  # fmt: skip
        return _store_unavailable(request)
    except redis.exceptions.ResponseError as exc:
        # A primary refusing writes for want of replicas (min-replicas-to-write), or a
        # replica cut off from its primary during a failover: transient, like an outage.
        if str(exc).startswith(_TRANSIENT_REFUSALS):
            return _store_unavailable(request)
        raise


_TRANSIENT_REFUSALS = ("NOREPLICAS", "MASTERDOWN")


def _unreadable(request: web.Request, exc: Exception) -> web.Response:
    """A body the handler could not read as sent (see ``client_error``): the client's error,
    which aiohttp would answer as our 500 if we let it through."""
    found = client_error(exc)
    if found is None:
        raise exc
    # The rest of the body cannot be read either, so nothing after it on the connection.
    problem = ProblemError(found[0], "The request body could not be read as sent.", close=True)
    return problem.response(_instance(request))


def _store_unavailable(request: web.Request) -> web.Response:
    # Nothing was stored, so the caller may safely retry.
    return ProblemError(
        503,
        "The event store is unreachable; nothing was stored. Retry later.",
        kind="store-unavailable",
        headers={"Retry-After": REDIS_DOWN_RETRY_AFTER},
    ).response(_instance(request))


def _instance(request: web.Request) -> str:
    # The decoded path may hold characters no URI reference can (spaces, '<', non-ASCII):
    # encode it again rather than echo what the caller sent.
    return URL.build(path=request.path).raw_path


def _allowed(exc: web.HTTPException) -> dict[str, str]:
    allow = exc.headers.get("Allow")
    return {"Allow": allow} if allow else {}
