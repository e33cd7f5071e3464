"""Request schemas (pydantic) and the JSON shapes the API answers with."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import orjson
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from webhook_service.api.scopes import Scope
from webhook_service.controls import CONTROLS
from webhook_service.delivery.policy import (
    MAX_ATTEMPTS,
    MAX_SCHEDULE_SECONDS,
    MAX_TIMEOUT_SECONDS,
    MIN_TIMEOUT_SECONDS,
    check_schedule,
)
from webhook_service.history.filters import EventSummary
from webhook_service.store.apikeys import ApiKeyRecord
from webhook_service.store.applications import ApplicationRecord, PortalOptions, is_app_id
from webhook_service.store.deliveries import Attempt, DeliveryRecord
from webhook_service.store.endpoints import EndpointRecord
from webhook_service.store.jobs import JobRecord
from webhook_service.timeutil import iso, parse_instant

EventType = Annotated[
    str,
    StringConstraints(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*$"),
]


def _unique(types: list[str] | None) -> list[str] | None:
    return sorted(set(types)) if types is not None else None


EventTypes = Annotated[
    list[EventType] | None, Field(min_length=1, max_length=256), AfterValidator(_unique)
]


def _no_controls(text: str) -> str:
    # People read these in terminals and pages that would obey a control character.
    found = CONTROLS.search(text)
    if found is not None:
        raise ValueError(f"control characters are not allowed (U+{ord(found.group()):04X})")
    return text


Url = Annotated[str, StringConstraints(min_length=1, max_length=2048), AfterValidator(_no_controls)]
Description = Annotated[str, StringConstraints(max_length=1024), AfterValidator(_no_controls)]

# Headers an endpoint may not set: ours (the signature, the body's framing) and those that
# would change how the request travels rather than what it says.
FORBIDDEN_HEADERS = frozenset(
    {
        "host", "content-length", "content-type", "content-encoding", "transfer-encoding",
        "connection", "keep-alive", "upgrade", "te", "trailer", "expect",
        "proxy-authorization", "proxy-authenticate", "proxy-connection",
        # What proxies say about the client and the hops, and method overrides: a receiver
        # behind a proxy may trust them.
        "forwarded", "x-real-ip", "via", "max-forwards",
        "x-http-method-override", "x-http-method", "x-method-override",
    }
)  # fmt: skip
FORBIDDEN_HEADER_PREFIXES = ("webhook-", "proxy-", "x-forwarded-")
MAX_HEADERS = 20


def _allowed_headers(headers: dict[str, str] | None) -> dict[str, str] | None:
    if headers is None:
        return None
    for name in headers:
        lowered = name.lower()
        if lowered in FORBIDDEN_HEADERS or lowered.startswith(FORBIDDEN_HEADER_PREFIXES):
            raise ValueError(f"the header {name!r} is set by the service and cannot be changed")
    if len({name.lower() for name in headers}) != len(headers):
        raise ValueError("a header name is given twice (names are case-insensitive)")
    return headers


# RFC 9110 token characters for names; values without control characters (no CR/LF).
HeaderName = Annotated[str, StringConstraints(pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$")]
HeaderValue = Annotated[str, StringConstraints(max_length=1024, pattern=r"^[^\x00-\x1f\x7f]*$")]
Headers = Annotated[
    dict[HeaderName, HeaderValue] | None,
    Field(max_length=MAX_HEADERS),
    AfterValidator(_allowed_headers),
]
RateLimit = Annotated[float, Field(gt=0, le=10_000)]
# An endpoint's own retry policy (delivery/policy.py), in place of the global settings.
RetryDelay = Annotated[float, Field(ge=0, le=MAX_SCHEDULE_SECONDS, allow_inf_nan=False)]
RetrySchedule = Annotated[
    list[RetryDelay], Field(min_length=1, max_length=MAX_ATTEMPTS), AfterValidator(check_schedule)
]
TimeoutSeconds = Annotated[
    float, Field(ge=MIN_TIMEOUT_SECONDS, le=MAX_TIMEOUT_SECONDS, allow_inf_nan=False)
]


class _Strict(BaseModel):
    # strict: "no" is not a boolean and "5" is not a number, as the OpenAPI schema says.
    model_config = ConfigDict(extra="forbid", strict=True)


# Channels narrow fan-out within an application: an endpoint that lists some receives only
# the events that carry one of them.
Channel = Annotated[
    str, StringConstraints(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._:-]+$")
]
Channels = Annotated[
    list[Channel] | None, Field(min_length=1, max_length=10), AfterValidator(_unique)
]


# An application's uid: the producer's own id for its customer. Never app_…, so that a path
# segment is an id or a uid by its look alone (store/applications.py is_app_id).
def _not_an_id(uid: str) -> str:
    if is_app_id(uid):
        raise ValueError("a uid may not start with app_, which marks an application id")
    if not uid.strip("."):
        # '.' and '..' as a path segment are resolved away by URL libraries, never sent.
        raise ValueError("a uid may not be dots alone")
    return uid


Uid = Annotated[
    str,
    StringConstraints(pattern=r"^[A-Za-z0-9._-]{1,256}$"),
    AfterValidator(_not_an_id),
]
AppName = Annotated[
    str, StringConstraints(min_length=1, max_length=256), AfterValidator(_no_controls)
]
MetadataValue = Annotated[str, StringConstraints(max_length=1024), AfterValidator(_no_controls)]
Metadata = Annotated[
    dict[Annotated[str, StringConstraints(min_length=1, max_length=64)], MetadataValue],
    Field(max_length=50),
]


# The portal's look and framing (store/applications.py PortalOptions). An origin or a logo's
# host ends up in a CSP header (portal/layout.py, portal/session.py frame_ancestors): a
# host name or IPv4 address and a port at most, nothing a header could read otherwise.
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HTTPS_HOST = rf"https://(?:{_LABEL}\.)*{_LABEL}(?::[0-9]{{1,5}})?"


def _origin(origin: str) -> str:
    urlsplit(origin).port  # noqa: B018  # raises ValueError past 65535
    return origin.lower()


PortalOrigin = Annotated[
    str,
    StringConstraints(max_length=300, pattern=f"^{_HTTPS_HOST}$"),
    AfterValidator(_origin),
]
PortalOrigins = Annotated[list[PortalOrigin] | None, Field(max_length=10), AfterValidator(_unique)]
PortalName = Annotated[
    str, StringConstraints(min_length=1, max_length=100), AfterValidator(_no_controls)
]
PortalLogoUrl = Annotated[
    str,
    StringConstraints(max_length=2048, pattern=f"^{_HTTPS_HOST}(?:/[^\\s\"'<>]*)?$"),
    AfterValidator(_no_controls),
]
PortalAccent = Annotated[str, StringConstraints(pattern=r"^#[0-9A-Fa-f]{6}$")]


class _PortalFields(_Strict):
    portal_origins: PortalOrigins = None
    portal_name: PortalName | None = None
    portal_logo_url: PortalLogoUrl | None = None
    portal_accent: PortalAccent | None = None

    def portal(self, kept: PortalOptions) -> PortalOptions:
        """The options this body gives; those it leaves out are ``kept`` (a patch's)."""
        given = self.model_fields_set
        return PortalOptions(
            tuple(self.portal_origins or ()) if "portal_origins" in given else kept.origins,
            self.portal_name if "portal_name" in given else kept.name,
            self.portal_logo_url if "portal_logo_url" in given else kept.logo_url,
            self.portal_accent if "portal_accent" in given else kept.accent,
        )


class NewApplicationIn(_Strict):
    """An event's ``application``: create the application the path names by uid, if it
    does not exist yet, in the same step that stores the event."""

    name: AppName


# Scheduled delivery (api/scheduling.py): how far ahead an event's deliveries may be due.
MAX_SCHEDULE_AHEAD_S = 30 * 86_400


def _with_offset(text: str) -> str:
    # Naive times are refused rather than taken as UTC: a producer's local time read as UTC
    # would send hours early or late, silently.
    try:
        has_offset = datetime.fromisoformat(text).tzinfo is not None
        parse_instant(text)
    except ValueError:
        raise ValueError("an RFC 3339 date-time, e.g. 2026-01-31T12:00:00Z") from None
    if not has_offset:
        raise ValueError("a date-time with its offset (Z or +hh:mm), e.g. 2026-01-31T12:00:00Z")
    return text


DeliverAt = Annotated[str, StringConstraints(max_length=64), AfterValidator(_with_offset)]
DelaySeconds = Annotated[int, Field(ge=0, le=MAX_SCHEDULE_AHEAD_S)]


class EventIn(_Strict):
    type: EventType
    data: dict[str, Any]
    channels: Channels = None
    application: NewApplicationIn | None = None
    # When its deliveries are due (one of the two at most; api/scheduling.py deliver_at_ms).
    deliver_at: DeliverAt | None = None
    delay_seconds: DelaySeconds | None = None


class ExampleIn(_Strict):
    """POST …/endpoints/{endpoint_id}/send-example."""

    event_type: EventType
    # None: the catalog type's first example.
    data: dict[str, Any] | None = None


class ApplicationIn(_PortalFields):
    name: AppName
    uid: Uid | None = None
    metadata: Metadata = Field(default_factory=dict)
    rate_limit: RateLimit | None = None


class ApplicationPatch(_PortalFields):
    name: AppName | None = None
    uid: Uid | None = None
    metadata: Metadata | None = None
    rate_limit: RateLimit | None = None


def application_json(record: ApplicationRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "name": record.name,
        "uid": record.uid,
        "metadata": record.metadata,
        "rate_limit": record.rate_limit,
        "created_at": iso(record.created_ms),
        "updated_at": iso(record.updated_ms),
        "portal_origins": list(record.portal.origins) or None,
        "portal_name": record.portal.name,
        "portal_logo_url": record.portal.logo_url,
        "portal_accent": record.portal.accent,
    }


class EndpointIn(_Strict):
    url: Url
    event_types: EventTypes = None
    description: Description = ""
    disabled: bool = False
    signature: Literal["hmac", "ed25519"] = "hmac"
    headers: Headers = None
    rate_limit: RateLimit | None = None
    operations: bool = False
    channels: Channels = None
    retry_schedule: RetrySchedule | None = None
    timeout_seconds: TimeoutSeconds | None = None
    # A payload filter (webhook_service/filters.py), checked by api/endpoints.py; null: none.
    filter: dict[str, Any] | None = None
    # "fifo": one delivery at a time, in the order the events were accepted; null: none.
    ordering: Literal["fifo"] | None = None
    # Each attempt carries a traceparent header naming its span (tracing.py).
    send_traceparent: bool = False


# A rotation keeps the old key signing for at most a week.
MAX_GRACE_SECONDS = 604_800


class RotateIn(_Strict):
    grace_period_seconds: int = Field(86_400, ge=0, le=MAX_GRACE_SECONDS)
    # A key the caller made: whsec_… for hmac endpoints, whsk_… for ed25519 ones.
    secret: Annotated[str, StringConstraints(max_length=200)] | None = None


class EndpointPatch(_Strict):
    url: Url | None = None
    event_types: EventTypes = None
    description: Description | None = None
    disabled: bool | None = None
    headers: Headers = None
    rate_limit: RateLimit | None = None
    operations: bool | None = None
    channels: Channels = None
    retry_schedule: RetrySchedule | None = None
    timeout_seconds: TimeoutSeconds | None = None
    # A payload filter (webhook_service/filters.py), checked by api/endpoints.py; null: none.
    filter: dict[str, Any] | None = None
    ordering: Literal["fifo"] | None = None
    send_traceparent: bool | None = None


def _instant(text: str) -> str:
    try:
        parse_instant(text)
    except ValueError:
        raise ValueError("an ISO 8601 date-time from 1970 on, e.g. 2026-01-31T12:00:00Z") from None
    return text


Instant = Annotated[str, StringConstraints(max_length=64), AfterValidator(_instant)]


class RecoverIn(_Strict):
    since: Instant
    until: Instant | None = None  # None: up to now


def job_json(job: JobRecord) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "id": job.id,
        "kind": job.kind,
        "state": job.state,
        "matched": job.matched,
        "retried": job.retried,
        "created_at": iso(job.created_ms),
        "updated_at": iso(job.updated_ms),
    }
    if job.deletion is not None:
        d = job.deletion
        shown.update(
            application=d.application,
            step=d.step.value,
            endpoints_deleted=d.endpoints,
            deliveries_ended=d.ended,
            events_purged=d.events,
            deliveries_purged=d.deliveries,
            attempts_purged=d.attempts,
            api_keys_revoked=d.api_keys,
        )
    return shown


class ReplayIn(_Strict):
    # None: every endpoint subscribed to the event's type now.
    endpoint_id: str | None = None


def event_summary_json(event: EventSummary) -> dict[str, Any]:
    return {
        "id": event.id,
        "application": event.application,
        "type": event.type,
        "channels": list(event.channels),
        "example": event.example,
        "timestamp": iso(event.created_ms),
        "deliver_at": None if event.deliver_at_ms is None else iso(event.deliver_at_ms),
        "key_id": event.key_id,
        "deliveries": event.deliveries,
        "payload_deleted": event.payload_deleted,
    }


def endpoint_json(record: EndpointRecord, headers: Mapping[str, str | None]) -> dict[str, Any]:
    """``headers``: the endpoint's own, opened or with each value withheld (None)."""
    return {
        "id": record.id,
        "application": record.application,
        "url": record.url,
        "description": record.description,
        "event_types": record.event_types,
        "channels": record.channels,
        "disabled": record.disabled,
        "disabled_reason": record.disabled_reason if record.disabled else None,
        "disabled_at": iso(record.disabled_at_ms) if record.disabled_at_ms else None,
        "headers": dict(headers),
        "rate_limit": record.rate_limit,
        "operations": record.operations,
        "retry_schedule": None if record.retry_schedule is None else list(record.retry_schedule),
        "timeout_seconds": record.timeout_seconds,
        "filter": None if record.filter is None else orjson.loads(record.filter),
        "ordering": record.ordering,
        "send_traceparent": record.send_traceparent,
        "signature": record.signature,
        "public_key": record.public_key,
        "created_at": iso(record.created_ms),
        "updated_at": iso(record.updated_ms),
    }


def delivery_json(record: DeliveryRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "application": record.application,
        "event_id": record.event_id,
        "endpoint_id": record.endpoint_id,
        "event_type": record.event_type,
        "status": record.status,
        "attempts": record.attempts,
        "next_attempt_at": iso(record.next_at_ms) if record.next_at_ms is not None else None,
        "last_status_code": record.last_code,
        "last_error": record.last_error,
        "created_at": iso(record.created_ms),
        "updated_at": iso(record.updated_ms),
    }


def attempt_json(attempt: Attempt) -> dict[str, Any]:
    return {
        "number": attempt.number,
        "started_at": iso(attempt.started_ms),
        "duration_ms": attempt.duration_ms,
        "status_code": attempt.status_code,
        "error": attempt.error,
        "response_body": attempt.response_body,
        "request_headers": attempt.request_headers,
        "response_headers": attempt.response_headers,
    }


def _distinct(scopes: list[Scope]) -> list[Scope]:
    return sorted(set(scopes))


class ApiKeyIn(_Strict):
    name: Annotated[
        str, StringConstraints(min_length=1, max_length=128, pattern=r"^[^\x00-\x1f\x7f]+$")
    ]
    # Not strict: a scope arrives as its JSON string, never as the enum member.
    scopes: Annotated[
        list[Annotated[Scope, Field(strict=False)]],
        Field(min_length=1, max_length=len(Scope)),
        AfterValidator(_distinct),
    ]
    rate_limit: RateLimit | None = None
    # Bind the key to one application (its id or uid): it sees nothing of any other.
    application: Annotated[str, StringConstraints(min_length=1, max_length=256)] | None = None


def api_key_json(record: ApiKeyRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "name": record.name,
        "scopes": list(record.scopes),
        "application": record.application,
        "rate_limit": record.rate_limit,
        "created_at": iso(record.created_ms),
    }
