"""One send, without I/O: the request, and what each answer or failure means next.

The sync and async clients only move bytes and wait; everything they decide (retry or not,
how long to wait, which error to raise) is decided here, once, for both.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol
from urllib.parse import quote, urlsplit

import orjson

from webhook_service.client.errors import (
    ProblemDetails,
    ServerError,
    TransportError,
    WebhookError,
    error_for,
)
from webhook_service.delivery.backoff import parse_retry_after

# Overload and "not now" answers. Each is safe to repeat because every try carries the same
# idempotency key: the service stores the event at most once and replays its first answer.
RETRY_STATUSES = frozenset({429, 502, 503, 504})
# In strict durability mode the first request with a key may still be confirming its fsync.
RETRY_KINDS = frozenset({"idempotency-in-flight"})


@dataclass(frozen=True)
class Backoff:
    """Jittered exponential backoff; a Retry-After from the service is a floor, not a hint."""

    # Enough tries that the deadline, not the count, ends a send: 6 gave up 8-15 s after the
    # first refused connection, while an API process restarting on a busy host refused them
    # for 4-5 s and a send through that took up to 7.3 s (tests/chaos/test_rolling_restart.py):
    # at the edge. 10 wait out at least a minute.
    max_attempts: int = 10
    base: float = 0.5
    cap: float = 30.0
    # No send takes longer than this, waits included: a wait that would end past it is not
    # begun, and the last failure is raised instead.
    deadline: float = 120.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1 or self.base < 0 or self.cap < 0 or self.deadline <= 0:
            raise ValueError("max_attempts >= 1, base and cap >= 0, deadline > 0")

    def delay(self, retries_done: int, retry_after: float | None, rng: random.Random) -> float:
        ceiling = min(self.cap, self.base * 2**retries_done)
        # "Equal jitter": never less than half the step, so a herd spreads out but still
        # backs off.
        delay = rng.uniform(ceiling / 2, ceiling)
        if retry_after is not None:
            delay = max(delay, retry_after * rng.uniform(1.0, 1.1))
        return delay


class Headers(Protocol):
    """A response's headers, looked up case-insensitively (urllib's and aiohttp's are)."""

    def get(self, name: str, /) -> str | None: ...


@dataclass(frozen=True)
class PreparedRequest:
    url: str
    body: bytes
    headers: Mapping[str, str]


@dataclass(frozen=True)
class Accepted:
    event_id: str


@dataclass(frozen=True)
class Wait:
    seconds: float


Step = Accepted | Wait


def service_url(base_url: str) -> str:
    """The service's base URL, without its trailing slash; http or https only."""
    scheme = urlsplit(base_url).scheme
    if scheme not in ("http", "https"):
        raise ValueError(f"the service URL must be http or https, not {base_url!r}")
    return base_url.rstrip("/")


def path_segment(value: str) -> str:
    """``value`` as one path segment, whatever it holds: never a ``/`` that adds a segment,
    a ``?`` that starts a query, nor a segment of dots alone, which clients and proxies
    resolve (``/v1/applications/../events`` is ``/v1/events``: the default application)."""
    quoted = quote(value, safe="")
    return quoted.replace(".", "%2E") if set(value) == {"."} else quoted


def json_headers(api_key: str) -> dict[str, str]:
    """What every request of the client carries: the key, and JSON both ways."""
    return {
        "Authorization": f"Bearer {api_key}",
        "Content-Type": "application/json",
        "Accept": "application/json, application/problem+json",
    }


def application_url(base_url: str, app: str, route: str) -> str:
    """``route`` of the application ``app`` (its id ``app_…`` or its uid)."""
    if not app:
        raise ValueError("the application is its id or uid; the default one's uid is 'default'")
    return f"{service_url(base_url)}/v1/applications/{path_segment(app)}/{route}"


def events_url(base_url: str, app: str) -> str:
    """Where an event for the application ``app`` (its id ``app_…`` or its uid) is posted."""
    return application_url(base_url, app, "events")


@dataclass(frozen=True)
class Schedule:
    """When an event's deliveries are due: at ``deliver_at`` (an aware datetime), or
    ``delay_seconds`` after the API accepts it; neither: at once. One at most."""

    deliver_at: datetime | None = None
    delay_seconds: int | None = None

    def __post_init__(self) -> None:
        if self.deliver_at is not None and self.delay_seconds is not None:
            raise ValueError("give deliver_at or delay_seconds, not both")
        if self.deliver_at is not None and self.deliver_at.tzinfo is None:
            # The API refuses a naive time rather than guess its zone.
            raise ValueError("deliver_at needs a time zone (an aware datetime)")

    def fields(self) -> dict[str, Any]:
        if self.deliver_at is not None:
            return {"deliver_at": self.deliver_at.isoformat()}
        if self.delay_seconds is not None:
            return {"delay_seconds": self.delay_seconds}
        return {}


def event_body(
    event_type: str,
    data: Mapping[str, Any],
    channels: Sequence[str] | None,
    create_as: str | None,
    schedule: Schedule | None = None,
) -> bytes:
    """The event as the API takes it: ``channels`` narrow its fan-out within the application;
    ``create_as`` names the application to create with it if the path's uid names none;
    ``schedule`` says when its deliveries are due."""
    if not isinstance(event_type, str):
        raise TypeError("send(app, event_type, data, ...): the application comes first")
    if isinstance(channels, str):
        # A string is a sequence of one-letter channels: surely not what was meant.
        raise TypeError("channels is a list of strings, not one string")
    event: dict[str, Any] = {"type": event_type, "data": dict(data)}
    if channels:
        event["channels"] = list(channels)
    if create_as is not None:
        event["application"] = {"name": create_as}
    if schedule is not None:
        event.update(schedule.fields())
    return orjson.dumps(event)


class Attempts:
    """The tries of one send; every try sends the same bytes with the same idempotency key."""

    def __init__(
        self,
        url: str,
        api_key: str,
        body: bytes,
        idempotency_key: str | None,
        backoff: Backoff,
        *,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        self.idempotency_key = idempotency_key or str(uuid.uuid4())
        self.request = PreparedRequest(
            url, body, {**json_headers(api_key), "Idempotency-Key": self.idempotency_key}
        )
        self._backoff = backoff
        self._clock = clock
        self._rng = rng or random.Random()  # noqa: S311 - jitter, not secrecy
        self._started = clock()
        self._tries = 0

    def answered(self, status: int, headers: Headers, body: bytes) -> Step:
        self._tries += 1
        if 200 <= status < 300:
            return Accepted(str(orjson.loads(body)["id"]))
        problem = ProblemDetails.parse(status, body)
        if status not in RETRY_STATUSES and problem.kind not in RETRY_KINDS:
            raise error_for(problem)
        retry_after = parse_retry_after(headers.get("Retry-After"), time.time())
        return self._wait_or_raise(retry_after, lambda: ServerError(problem))

    def failed(self, exc: Exception) -> Step:
        """The request did not get an answer: refused, reset or timed out."""
        self._tries += 1

        def give_up() -> WebhookError:
            error = TransportError(f"could not reach {self.request.url}: {exc!r}")
            error.__cause__ = exc
            return error

        return self._wait_or_raise(None, give_up)

    def _wait_or_raise(self, retry_after: float | None, final: Callable[[], WebhookError]) -> Wait:
        if self._tries >= self._backoff.max_attempts:
            raise final()
        delay = self._backoff.delay(self._tries - 1, retry_after, self._rng)
        if self._clock() - self._started + delay > self._backoff.deadline:
            raise final()
        return Wait(delay)


class ClientBase:
    """What both clients hold: where events go, as whom, and how a send is retried."""

    def __init__(self, base_url: str, api_key: str, backoff: Backoff | None) -> None:
        self._base_url = service_url(base_url)
        self._api_key = api_key
        self._backoff = backoff or Backoff()

    def _attempts(
        self,
        app: str,
        event_type: str,
        data: Mapping[str, Any],
        idempotency_key: str | None,
        channels: Sequence[str] | None,
        create_as: str | None,
        schedule: Schedule | None = None,
    ) -> Attempts:
        return Attempts(
            events_url(self._base_url, app),
            self._api_key,
            event_body(event_type, data, channels, create_as, schedule),
            idempotency_key,
            self._backoff,
        )
