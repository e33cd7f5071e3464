"""Request schemas (pydantic) and the JSON shapes the API answers with."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from webhook_service.store.deliveries import Attempt, DeliveryRecord
from webhook_service.store.endpoints import EndpointRecord
from webhook_service.timeutil import iso

EventType = Annotated[
    str,
    StringConstraints(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*$"),
]


def _unique(types: list[str] | None) -> list[str] | None:
    return sorted(set(types)) if types is not None else None


EventTypes = Annotated[
    list[EventType] | None, Field(min_length=1, max_length=256), AfterValidator(_unique)
]
Url = Annotated[str, StringConstraints(min_length=1, max_length=2048)]
Description = Annotated[str, StringConstraints(max_length=1024)]


class _Strict(BaseModel):
    # strict: "no" is not a boolean and "5" is not a number, as the OpenAPI schema says.
    model_config = ConfigDict(extra="forbid", strict=True)


class EventIn(_Strict):
    type: EventType
    data: dict[str, Any]


class EndpointIn(_Strict):
    url: Url
    event_types: EventTypes = None
    description: Description = ""
    disabled: bool = False
    signature: Literal["hmac", "ed25519"] = "hmac"


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


def endpoint_json(record: EndpointRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "url": record.url,
        "description": record.description,
        "event_types": record.event_types,
        "disabled": record.disabled,
        "signature": record.signature,
        "public_key": record.public_key,
        "created_at": iso(record.created_ms),
        "updated_at": iso(record.updated_ms),
    }


def delivery_json(record: DeliveryRecord) -> dict[str, Any]:
    return {
        "id": record.id,
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
    }
