"""What a history query asks for, and what one page of the answer is.

Plain data, flat and JSON-able: a bulk job stores the delivery filter it pages with
(``to_json``; store/jobs.py keeps the text and never reads it).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Generic, TypeVar

import orjson

from webhook_service.store.deliveries import DeliveryRecord

T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    next_cursor: str | None


@dataclass(frozen=True)
class TimeRange:
    """The creation-time window every history filter has (ids carry their creation time,
    so it is an id range too)."""

    since_ms: int | None = None
    until_ms: int | None = None


@dataclass(frozen=True)
class DeliveryFilter(TimeRange):
    endpoint_id: str | None = None
    event_id: str | None = None
    status: str | None = None
    event_type: str | None = None
    status_class: str | None = None
    attempts_min: int | None = None
    attempts_max: int | None = None
    application: str | None = None  # None: every application's, and operational ones

    def matches(self, record: DeliveryRecord) -> bool:
        """Every filter but the time range (which the query's id range answers)."""
        return (
            self.matches_for_good(record)
            and (self.status is None or record.status == self.status)
            and (self.status_class is None or record.last_class == self.status_class)
            and (self.attempts_min is None or record.attempts >= self.attempts_min)
            and (self.attempts_max is None or record.attempts <= self.attempts_max)
        )

    def matches_for_good(self, record: DeliveryRecord) -> bool:
        """The filters on what never changes about a delivery (its endpoint, event, type,
        application): a record that fails them fails whatever state it is in now."""
        return (
            (self.endpoint_id is None or record.endpoint_id == self.endpoint_id)
            and (self.event_id is None or record.event_id == self.event_id)
            and (self.event_type is None or record.event_type == self.event_type)
            and (self.application is None or record.application == self.application)
        )

    def to_json(self) -> str:
        return orjson.dumps(dataclasses.asdict(self)).decode()

    @classmethod
    def from_json(cls, text: str) -> DeliveryFilter:
        return cls(**orjson.loads(text))


@dataclass(frozen=True)
class EventFilter(TimeRange):
    event_type: str | None = None
    key_id: str | None = None
    application: str | None = None  # None: every application's, and operational ones


@dataclass(frozen=True)
class EventSummary:
    """An event as a list shows it: no payload (that can be 256 KiB)."""

    id: str
    type: str
    created_ms: int
    key_id: str
    deliveries: int
    payload_deleted: bool
    application: str | None  # None: an operational event
    channels: tuple[str, ...]
    example: bool = False
    deliver_at_ms: int | None = None  # its deliver_at, if it had one
