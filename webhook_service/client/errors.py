"""What a send can fail with: every 4xx is a typed error carrying the problem details."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson


@dataclass(frozen=True)
class ProblemDetails:
    """An RFC 9457 problem document, or the closest thing a non-problem answer gives."""

    status: int
    type: str = "about:blank"
    title: str = ""
    detail: str = ""
    instance: str = ""
    # Validation failures: one {"pointer", "detail"} per offending field.
    errors: Sequence[Mapping[str, str]] = field(default_factory=tuple)

    @property
    def kind(self) -> str:
        """The last segment of ``type``: ``validation-failed``, ``idempotency-in-flight``, …"""
        return self.type.rstrip("/").rsplit("/", 1)[-1]

    @classmethod
    def parse(cls, status: int, body: bytes) -> ProblemDetails:
        # A proxy in front of the API may answer in HTML or plain text; keep what it said.
        try:
            raw: Any = orjson.loads(body) if body else None
        except orjson.JSONDecodeError:
            raw = None
        if not isinstance(raw, dict):
            return cls(status, detail=body[:500].decode("utf-8", "replace"))
        errors = raw.get("errors")
        return cls(
            status=status,
            type=str(raw.get("type", "about:blank")),
            title=str(raw.get("title", "")),
            detail=str(raw.get("detail", "")),
            instance=str(raw.get("instance", "")),
            errors=tuple(e for e in errors if isinstance(e, dict))
            if isinstance(errors, list)
            else (),
        )


class WebhookError(Exception):
    """Base of everything the producer client raises."""


class TransportError(WebhookError):
    """The service could not be reached (connection refused, reset, timed out) on any try."""


class APIError(WebhookError):
    def __init__(self, problem: ProblemDetails) -> None:
        super().__init__(f"{problem.status} {problem.title or problem.kind}: {problem.detail}")
        self.problem = problem

    @property
    def status(self) -> int:
        return self.problem.status


class ClientError(APIError):
    """A 4xx: sending the same request again would fail the same way."""


class AuthenticationError(ClientError):
    """401 or 403: the API key is missing, wrong or not allowed to do this (send events,
    make portal links)."""


class InvalidEvent(ClientError):
    """400, 404, 413, 415 or 422: the event was refused; ``problem.errors`` says where.

    A 404 is an application that does not exist (or that the key may not see): send with
    ``create_as=`` to create it with the event."""


class IdempotencyKeyReused(ClientError):
    """The idempotency key was already used for a different event."""


class ServerError(APIError):
    """A 5xx that is not worth retrying, or a retryable answer that outlasted every try."""


def error_for(problem: ProblemDetails, refused: type[ClientError] = InvalidEvent) -> APIError:
    """The typed error of a 4xx or 5xx; ``refused``: the class of a request refused as it
    is (a send's is ``InvalidEvent``)."""
    if problem.kind == "idempotency-key-reused":
        return IdempotencyKeyReused(problem)
    if problem.status in (401, 403):
        return AuthenticationError(problem)
    if problem.status in (400, 404, 413, 415, 422):
        return refused(problem)
    if problem.status >= 500:
        return ServerError(problem)
    return ClientError(problem)
