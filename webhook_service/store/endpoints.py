"""Endpoints: where deliveries go, which event types and channels they take, their sealed
secrets and their own headers (values sealed too: they often carry the receiver's
credentials). Each belongs to one application for good, and receives only its events."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from math import inf
from typing import Literal, cast

import orjson
from redis.asyncio import Redis
from redis.exceptions import WatchError

from webhook_service.crypto import SecretBox
from webhook_service.store import keys
from webhook_service.store.applications import DEFAULT_APP_ID
from webhook_service.store.paging import newest_first
from webhook_service.store.scripts import Scripts


@dataclass(frozen=True)
class SealedSecret:
    sealed: str
    expires_ms: int | None = None  # None: the current key; otherwise kept for rotation grace


@dataclass
class EndpointRecord:
    id: str
    url: str
    description: str
    event_types: list[str] | None
    disabled: bool
    created_ms: int
    updated_ms: int
    secrets: list[SealedSecret] = field(default_factory=list)
    signature: Literal["hmac", "ed25519"] = "hmac"
    public_key: str | None = None  # ed25519 only: what subscribers verify with
    # Sent with every delivery: name -> value sealed with header_associated(id, name).
    sealed_headers: dict[str, str] = field(default_factory=dict)
    rate_limit: float | None = None  # requests per second, across every worker
    operations: bool = False  # receives our operational events
    disabled_reason: str | None = None  # manual, gone (410) or failing
    disabled_at_ms: int | None = None
    # Its application, set at creation: an update leaves an endpoint in its own. The
    # default application is a single-tenant deployment's, and the operator's.
    application: str = DEFAULT_APP_ID
    # None: every event of its types; otherwise only an event sharing one of these.
    channels: list[str] | None = None
    # Its own retry policy (delivery/policy.py); None: the global setting's.
    retry_schedule: tuple[float, ...] | None = None
    timeout_seconds: float | None = None
    # 'fifo': its deliveries go one at a time, in the order they were made (lua/common.lua
    # pending_in); None: as many at once as the limits allow.
    ordering: Literal["fifo"] | None = None
    # Each attempt carries a W3C traceparent header naming its span (tracing.py).
    send_traceparent: bool = False
    # Its payload filter as stored (webhook_service/filters.py Filter.text); None: every
    # event of its types and channels.
    filter: str | None = None


# Rotation keeps the current key and at most this many older ones still in their grace.
MAX_SECRETS = 10


def rotated(
    secrets: Sequence[SealedSecret], new_sealed: str, now_ms: int, grace_ms: int
) -> list[SealedSecret]:
    """The new key becomes current; the old current one signs on until its grace ends."""
    older = [
        SealedSecret(s.sealed, now_ms + grace_ms if s.expires_ms is None else s.expires_ms)
        for s in secrets
    ]
    alive = sorted(
        (s for s in older if (s.expires_ms or 0) > now_ms),
        key=lambda s: s.expires_ms or 0,
        reverse=True,
    )
    return [SealedSecret(new_sealed), *alive[: MAX_SECRETS - 1]]


def encode_secrets(secrets: Sequence[SealedSecret]) -> str:
    return orjson.dumps([{"k": s.sealed, "exp": s.expires_ms} for s in secrets]).decode()


def decode_secrets(text: str) -> list[SealedSecret]:
    return [SealedSecret(item["k"], item["exp"]) for item in orjson.loads(text or "[]")]


def open_secrets(
    box: SecretBox, endpoint_id: str, text: str, now_ms: int
) -> tuple[list[str], float]:
    """The plain secrets still valid now, current first (every one of them signs), and the
    ms at which the first of them expires, when this set must be opened again."""
    live = [s for s in decode_secrets(text) if s.expires_ms is None or s.expires_ms > now_ms]
    expiry = min((s.expires_ms for s in live if s.expires_ms is not None), default=inf)
    return [box.open(s.sealed, endpoint_id) for s in live], expiry


def header_associated(endpoint_id: str, name: str) -> str:
    """What a header value is sealed to: its endpoint and its name, so a sealed value moved
    onto another header, another endpoint or into ``secrets`` does not open there (the
    worker would send a signing key to the receiver)."""
    return f"{endpoint_id}/header/{name}"


def seal_headers(box: SecretBox, endpoint_id: str, headers: Mapping[str, str]) -> dict[str, str]:
    """Name -> sealed value, as stored; names stay readable (endpoints:read lists them)."""
    return {
        name: box.seal(value, header_associated(endpoint_id, name))
        for name, value in headers.items()
    }


def open_headers(box: SecretBox, endpoint_id: str, sealed: Mapping[str, str]) -> dict[str, str]:
    return {
        name: box.open(token, header_associated(endpoint_id, name))
        for name, token in sealed.items()
    }


def encode_headers(sealed: Mapping[str, str]) -> str:
    return orjson.dumps(dict(sealed)).decode() if sealed else ""


def decode_headers(text: str) -> dict[str, str]:
    return cast(dict[str, str], orjson.loads(text)) if text else {}


def encode_channels(channels: Sequence[str] | None) -> str:
    """An endpoint's channels field: '' for none, else their JSON list, sorted, once each."""
    return orjson.dumps(sorted(set(channels))).decode() if channels else ""


def encode_schedule(schedule: Sequence[float] | None) -> str:
    """An endpoint's retry_schedule field: '' for none (the global one), else a JSON list."""
    return "" if schedule is None else orjson.dumps(list(schedule)).decode()


def decode_schedule(text: str) -> tuple[float, ...] | None:
    return tuple(float(delay) for delay in orjson.loads(text)) if text else None


def decode_timeout(text: str) -> float | None:
    """An endpoint's timeout field: '' for none (the global one), else seconds."""
    return float(text) if text else None


def _from_hash(endpoint_id: str, raw: dict[str, str]) -> EndpointRecord:
    types = raw.get("event_types", "")
    channels = raw.get("channels", "")
    return EndpointRecord(
        id=endpoint_id,
        url=raw["url"],
        description=raw.get("description", ""),
        event_types=orjson.loads(types) if types else None,
        disabled=raw.get("disabled") == "1",
        created_ms=int(raw["created"]),
        updated_ms=int(raw["updated"]),
        secrets=decode_secrets(raw.get("secrets", "")),
        signature="ed25519" if raw.get("signature") == "ed25519" else "hmac",
        public_key=raw.get("public_key") or None,
        sealed_headers=decode_headers(raw.get("headers", "")),
        rate_limit=float(raw["rate_limit"]) if raw.get("rate_limit") else None,
        operations=raw.get("operations") == "1",
        disabled_reason=raw.get("disabled_reason") or None,
        disabled_at_ms=int(raw["disabled_at"]) if raw.get("disabled_at") else None,
        application=raw["app"],
        channels=orjson.loads(channels) if channels else None,
        retry_schedule=decode_schedule(raw.get("retry_schedule", "")),
        timeout_seconds=decode_timeout(raw.get("timeout", "")),
        filter=raw.get("filter") or None,
        ordering="fifo" if raw.get("ordering") == "fifo" else None,
        send_traceparent=raw.get("send_tp") == "1",
    )


class EndpointLimitReached(Exception):
    """The application has WEBHOOK_MAX_ENDPOINTS_PER_APP endpoints already: one more is
    refused."""


class ApplicationMissing(Exception):
    """A new endpoint's application does not exist (the default one is made on its first
    use): nothing was written."""


@dataclass(frozen=True)
class EndpointSaveArgs:
    """endpoint_save.lua's arguments, in the order its head names them but for the field
    pairs, which the script takes last."""

    endpoint_id: str
    max_endpoints: int  # refuse a new endpoint when its application has this many; 0: none
    fields: Mapping[str, str | int]  # the hash fields to write
    application: str = DEFAULT_APP_ID  # a new endpoint's (an existing one keeps its own)

    def keys(self) -> list[str]:
        return [keys.endpoint(self.endpoint_id)]

    def argv(self) -> list[str | int | float]:
        return [
            self.endpoint_id,
            self.max_endpoints,
            self.application,
            *(item for pair in self.fields.items() for item in pair),
        ]


class SaveOutcome(StrEnum):
    """endpoint_save.lua's reply."""

    CREATED = "created"
    UPDATED = "updated"
    # A new endpoint would pass its application's limit: nothing written.
    LIMIT_REACHED = "limit_reached"
    # A new endpoint's application does not exist (nor is it the default): nothing written.
    NO_APP = "no_app"


@dataclass(frozen=True)
class EndpointStateArgs:
    """endpoint_state.lua's arguments, in the order its head names them."""

    endpoint_id: str
    disabled: bool  # True: disable (reason 'manual'); False: enable
    now_ms: int

    def keys(self) -> list[str]:
        return [keys.endpoint(self.endpoint_id)]

    def argv(self) -> list[str | int | float]:
        return [self.endpoint_id, int(self.disabled), self.now_ms]


@dataclass(frozen=True)
class EndpointDeleteArgs:
    """endpoint_delete.lua's arguments, in the order its head names them."""

    endpoint_id: str

    def keys(self) -> list[str]:
        return [keys.endpoint(self.endpoint_id)]

    def argv(self) -> list[str | int | float]:
        return [self.endpoint_id]


# The application hash's field that endpoint_save.lua bumps with every change of one of
# its endpoints' filters, and ingest.lua compares with the version the API evaluated.
FILTER_VERSION = "filter_v"


@dataclass(frozen=True)
class AppFilters:
    """An application's filtered endpoints as of one version of its filters."""

    version: int  # its filter_v when read (0: none of its endpoints ever had a filter)
    filters: tuple[tuple[str, str], ...]  # (endpoint id, Filter.text)


class EndpointStore:
    def __init__(self, redis: Redis, scripts: Scripts) -> None:
        self._redis = redis
        self._scripts = scripts

    async def save(
        self, record: EndpointRecord, *, creating: bool, max_endpoints: int = 0
    ) -> SaveOutcome:
        """Write the endpoint: CREATED or UPDATED, as the store found it. Secrets, the
        enabled state and the application only on creation: later the first two change by
        their own atomic steps, so an update never undoes a rotation or a disable. A new
        endpoint is refused when its application has ``max_endpoints`` already (0: no
        limit; EndpointLimitReached) or does not exist (ApplicationMissing); the default
        application is created on its first use."""
        types = (
            ""
            if record.event_types is None
            else orjson.dumps(sorted(set(record.event_types))).decode()
        )
        fields: dict[str, str | int] = {
            "url": record.url,
            "description": record.description,
            "event_types": types,
            "created": record.created_ms,
            "updated": record.updated_ms,
            "signature": record.signature,
            "public_key": record.public_key or "",
            "headers": encode_headers(record.sealed_headers),
            "rate_limit": "" if record.rate_limit is None else repr(record.rate_limit),
            "operations": "1" if record.operations else "0",
            "channels": encode_channels(record.channels),
            "retry_schedule": encode_schedule(record.retry_schedule),
            "timeout": "" if record.timeout_seconds is None else repr(record.timeout_seconds),
            "filter": record.filter or "",
            "ordering": record.ordering or "",
            "send_tp": "1" if record.send_traceparent else "",
        }
        if creating:
            fields["secrets"] = encode_secrets(record.secrets)
            fields["disabled"] = "1" if record.disabled else "0"
            if record.disabled:
                fields["disabled_reason"] = "manual"
                fields["disabled_at"] = record.created_ms
        # A new endpoint's id carries its application's mark: its keys are of that bucket
        # (an update names its application to no effect: it stays in its own).
        if creating and keys.bucket_of(record.id) != keys.bucket_of(record.application):
            raise ValueError(f"endpoint {record.id} is not of {record.application}'s bucket")
        args = EndpointSaveArgs(record.id, max_endpoints, fields, record.application)
        saved = SaveOutcome(await self._scripts.run("endpoint_save", args.keys(), args.argv()))
        if saved is SaveOutcome.LIMIT_REACHED:
            raise EndpointLimitReached(max_endpoints)
        if saved is SaveOutcome.NO_APP:
            raise ApplicationMissing(record.application)
        return saved

    async def set_disabled(self, endpoint_id: str, disabled: bool, now_ms: int) -> bool:
        """Disable (reason 'manual') or enable; False when there is no such endpoint."""
        args = EndpointStateArgs(endpoint_id, disabled, now_ms)
        found: int = await self._scripts.run("endpoint_state", args.keys(), args.argv())
        return found == 1

    async def rotate(
        self, endpoint_id: str, new_sealed: str, public_key: str | None, now_ms: int, grace_ms: int
    ) -> EndpointRecord | None:
        """Swap in a new current key, atomically against concurrent rotations."""
        key = keys.endpoint(endpoint_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            while True:
                try:
                    await pipe.watch(key)
                    raw = cast(dict[str, str], await pipe.hgetall(key))
                    if not raw:
                        return None
                    record = _from_hash(endpoint_id, raw)
                    record.secrets = rotated(record.secrets, new_sealed, now_ms, grace_ms)
                    record.public_key = public_key
                    record.updated_ms = now_ms
                    pipe.multi()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
                    pipe.hset(
                        key,
                        mapping={
                            "secrets": encode_secrets(record.secrets),
                            "public_key": public_key or "",
                            "updated": now_ms,
                        },
                    )
                    await pipe.execute()
                    return record
                except WatchError:
                    continue

    async def filters(self, application: str) -> AppFilters:
        """The application's endpoints that carry a filter, and the filter version they are
        of. The version is read first (with the endpoint list, in one MULTI): a filter
        written before the filters are read makes them newer than the version, which
        ingest.lua then finds stale, never older."""
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hget(keys.app(application), FILTER_VERSION)
            pipe.zrange(keys.app_endpoints(application), 0, -1)
            version, endpoint_ids = await pipe.execute()
        if not version:
            return AppFilters(0, ())
        async with self._redis.pipeline(transaction=False) as pipe:
            for endpoint_id in endpoint_ids:
                pipe.hget(keys.endpoint(endpoint_id), "filter")
            texts = await pipe.execute()
        found = tuple((e, t) for e, t in zip(endpoint_ids, texts, strict=True) if t)
        return AppFilters(int(version), found)

    async def get(self, endpoint_id: str) -> EndpointRecord | None:
        raw = cast(dict[str, str], await self._redis.hgetall(keys.endpoint(endpoint_id)))
        return _from_hash(endpoint_id, raw) if raw else None

    async def delete(self, endpoint_id: str) -> bool:
        """The endpoint and its subscriptions gone; False when there was no such endpoint."""
        args = EndpointDeleteArgs(endpoint_id)
        found: int = await self._scripts.run("endpoint_delete", args.keys(), args.argv())
        return found == 1

    async def page(
        self, limit: int, cursor: str | None, application: str
    ) -> tuple[list[EndpointRecord], str | None]:
        """One application's endpoints, newest first; the cursor is the last id of the
        previous page."""
        found, next_cursor = await newest_first(
            self._redis, keys.app_endpoints(application), keys.endpoint, limit, cursor
        )
        return [_from_hash(endpoint_id, raw) for endpoint_id, raw in found], next_cursor
