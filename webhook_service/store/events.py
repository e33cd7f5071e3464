"""Accepting events: the one atomic step behind every 202, and reading events back.

Each script here has its arguments (``IngestArgs``, ``ReplayArgs``, ``ExpungeArgs``,
``ScheduleCancelArgs``: ``argv`` gives them in the order the script's head names them) and
its parsed reply (``Accepted``, ``Replayed``, ``Expunged``, ``ScheduleCancelled``), whose
outcome is one of the script's answers."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal, cast

import orjson
from redis.asyncio import Redis

from webhook_service.ids import event_deliveries, id_time_ms, mark_of, new_id
from webhook_service.store import keys
from webhook_service.store.applications import DEFAULT_APP_ID, DEFAULT_APPLICATION, NewApplication
from webhook_service.store.scripts import Scripts
from webhook_service.store.states import CANCELLED


@dataclass(frozen=True)
class IdempotencyClaim:
    # The caller's API key id: keys are scoped to the caller, and to the event's
    # application (IngestArgs.app_id), which names the record with it.
    key_id: str
    key: str
    fingerprint: str
    ttl_s: int
    # 'in_flight' while the API still has work to do before answering (strict durability)
    state: Literal["done", "in_flight"]
    until_ms: int


@dataclass(frozen=True)
class InlineWakeup:
    """A new event's wake-ups, pushed onto a Celery queue by the ingest script itself: they
    cost the API nothing, and an event is never stored without them. ``template`` is the
    queue message with ``#TASK#`` and ``#IDS#`` to fill in (webhook_service/wakeup.py)."""

    queue: str
    template: str
    batch: int


class IngestOutcome(StrEnum):
    """What ingest.lua answers."""

    CREATED = "created"
    REPLAY = "replay"  # the idempotency key's first request's answer, again
    MISMATCH = "mismatch"  # the key was used with another body
    IN_FLIGHT = "in_flight"  # the key's first request is not answered yet (strict durability)
    # The log outbox holds `backlog_max` records; nothing was stored.
    BACKLOG_FULL = "backlog_full"
    # The application does not exist and none was to be created (or its uid was taken
    # meanwhile by another): nothing was stored.
    NO_APP = "no_app"
    # The application is over its rate_limit: nothing was stored; Accepted.retry_after_ms.
    THROTTLED = "throttled"
    # An example's endpoint (IngestArgs.only_endpoint) is none of the application's.
    NO_ENDPOINT = "no_endpoint"
    # IngestArgs.filter_version is no longer the application's: a filter changed since the
    # API evaluated them; nothing was stored (api/endpoint_filters.py reads them again).
    STALE = "stale"


@dataclass(frozen=True)
class IngestArgs:
    """ingest.lua's arguments, in the order its head names them."""

    now_ms: int
    event_id: str
    event_type: str
    body: str
    key_id: str
    budget: int
    grace_ms: int
    idempotency: IdempotencyClaim | None
    wakeup: InlineWakeup | None
    backlog_max: int
    app_id: str  # always an id (the API resolves uids)
    channels: tuple[str, ...]
    # Made in the same step when app_id does not exist; the default application always is.
    create_app: NewApplication | None
    # An example: the event goes to this one endpoint of app_id's alone, whatever its
    # types and channels, and is marked so. None: every endpoint that takes it.
    only_endpoint: str | None = None
    # The application's filter version the API evaluated its endpoints' filters with (None:
    # none were, for an example), and the filtered endpoints the event did not pass, which
    # the fan-out leaves out (api/endpoint_filters.py).
    filter_version: int | None = None
    filtered_out: tuple[str, ...] = ()
    # The event's deliver_at (ms; None: none): kept with it, and its deliveries are due
    # then, without a wake-up now, when that is later than now_ms (common.lua create_event).
    deliver_at_ms: int | None = None
    # A valid W3C traceparent (tracing.py), kept as the event's field tp: every attempt's
    # span links to it. None: none.
    traceparent: str | None = None

    def __post_init__(self) -> None:
        if self.create_app is not None and self.create_app.id != self.app_id:
            raise ValueError(f"create_app {self.create_app.id} is not app_id {self.app_id}")
        # One step, one bucket: the event is made in its application's (ids.new_id's mark),
        # and so is a new application's uid mapping (applications.new_app_id).
        if keys.bucket_of(self.event_id) != keys.bucket_of(self.app_id):
            raise ValueError(f"event {self.event_id} is not of {self.app_id}'s bucket")
        uid = self.create_app.uid if self.create_app is not None else None
        if uid and keys.uid_bucket(uid) != keys.bucket_of(self.app_id):
            raise ValueError(f"{self.app_id} is not of the bucket of its uid {uid!r}")

    def keys(self) -> list[str]:
        return [keys.event(self.event_id)]

    def argv(self) -> list[str | int | float]:
        idem, wake = self.idempotency, self.wakeup
        claim = (
            (keys.idempotency(self.app_id, idem.key_id, idem.key), idem.fingerprint,
             idem.ttl_s, idem.state, idem.until_ms)
            if idem else ("", "", 0, "", 0)
        )  # fmt: skip
        create = self.create_app
        if create is None and self.app_id == DEFAULT_APP_ID:
            create = DEFAULT_APPLICATION
        channels = orjson.dumps(sorted(set(self.channels))).decode() if self.channels else ""
        return [
            self.now_ms, self.event_id, self.event_type, self.body, self.key_id, *claim,
            self.budget, self.grace_ms,
            *((wake.queue, wake.template, wake.batch) if wake else ("", "", 0)),
            idem.key if idem else "", self.backlog_max, self.app_id, channels,
            *((create.name, create.uid or "") if create else ("", "")),
            self.only_endpoint or "",
            "" if self.filter_version is None else self.filter_version,
            orjson.dumps(self.filtered_out).decode() if self.filtered_out else "",
            "" if self.deliver_at_ms is None else self.deliver_at_ms,
            self.traceparent or "",
        ]  # fmt: skip


@dataclass(frozen=True)
class Accepted:
    outcome: IngestOutcome
    event_id: str = ""
    event_type: str = ""
    created_ms: int = 0
    # The pending ones to wake now: not scheduled, nor behind a FIFO line's head.
    delivery_ids: tuple[str, ...] = ()
    fanout: int = 0
    woken: bool = False  # their wake-ups are queued already (InlineWakeup)
    retry_after_ms: int = 0  # THROTTLED: when the application's limit takes one more
    # CREATED: every delivery made, pending, scheduled or kept (a disabled endpoint's).
    deliveries: tuple[str, ...] = ()

    @classmethod
    def parse(cls, reply: list[Any], args: IngestArgs) -> Accepted:
        """ingest.lua's reply: {'created', ids, pending ids}, {'replay', event id, type,
        created ms, fanout}, {'throttled', ms} or {why}. A created event is the one
        ``args`` describe, which the script does not send back."""
        outcome = IngestOutcome(reply[0])
        if outcome is IngestOutcome.CREATED:
            # Only pending deliveries need a worker now; a disabled endpoint's wait for
            # recovery, scheduled ones for the scheduler's claim at their time.
            return cls(
                outcome, args.event_id, args.event_type, args.now_ms, tuple(reply[2]),
                len(reply[1]), args.wakeup is not None, deliveries=tuple(reply[1]),
            )  # fmt: skip
        if outcome is IngestOutcome.REPLAY:
            return cls(outcome, reply[1], reply[2], int(reply[3]), (), int(reply[4]))
        if outcome is IngestOutcome.THROTTLED:
            return cls(outcome, retry_after_ms=int(reply[1]))
        return cls(outcome)


class ReplayOutcome(StrEnum):
    """What replay.lua answers."""

    OK = "ok"
    MISSING = "missing"  # no such event, or one sent with another key than the sender's
    NO_PAYLOAD = "no_payload"  # its payload was expunged
    NO_ENDPOINT = "no_endpoint"  # the endpoint named does not exist in the event's application
    # It does not take the event's type, or its channels, or its filter passes it not.
    NOT_SUBSCRIBED = "not_subscribed"
    ENDPOINT_DISABLED = "endpoint_disabled"
    # ReplayArgs.filter_version is no longer the application's; nothing was written.
    STALE = "stale"


@dataclass(frozen=True)
class ReplayArgs:
    """replay.lua's arguments, in the order its head names them."""

    now_ms: int
    event_id: str
    # The new ids' part after 'dlv_' (26 characters): the replay's own time and randomness
    # where an original's are the event's (ids.delivery_id), so the two never collide.
    part: str
    budget: int
    grace_ms: int
    endpoint_id: str | None  # None: every endpoint subscribed now
    sender: str | None  # the API key id the event must have been sent with; None: any
    # As IngestArgs': the filters as they are at the replay (None: not evaluated, for our
    # operational events), and the endpoints whose filter the event does not pass.
    filter_version: int | None = None
    filtered_out: tuple[str, ...] = ()

    def keys(self) -> list[str]:
        return [keys.event(self.event_id)]

    def argv(self) -> list[str | int | float]:
        return [
            self.now_ms, self.event_id, self.part, self.budget, self.grace_ms,
            self.endpoint_id or "", self.sender or "",
            "" if self.filter_version is None else self.filter_version,
            orjson.dumps(self.filtered_out).decode() if self.filtered_out else "",
        ]  # fmt: skip


@dataclass(frozen=True)
class Replayed:
    outcome: ReplayOutcome
    delivery_ids: tuple[str, ...] = ()
    pending: tuple[str, ...] = ()  # the ones to wake; a disabled endpoint's wait

    @classmethod
    def parse(cls, reply: list[Any]) -> Replayed:
        """replay.lua's reply: {'ok', ids, pending ids} or {why}."""
        outcome = ReplayOutcome(reply[0])
        if outcome is not ReplayOutcome.OK:
            return cls(outcome)
        return cls(outcome, tuple(reply[1]), tuple(reply[2]))


class ExpungeOutcome(StrEnum):
    """What expunge.lua answers."""

    EXPUNGED = "expunged"  # the event has no payload now (or had none already)
    MISSING = "missing"  # no such event, or one sent with another key than the sender's


@dataclass(frozen=True)
class ExpungeArgs:
    """expunge.lua's arguments, in the order its head names them."""

    event_id: str
    now_ms: int
    sender: str | None  # the API key id the event must have been sent with; None: any

    def keys(self) -> list[str]:
        return [keys.event(self.event_id)]

    def argv(self) -> list[str | int | float]:
        return [self.event_id, self.now_ms, self.sender or ""]


@dataclass(frozen=True)
class Expunged:
    outcome: ExpungeOutcome

    @classmethod
    def parse(cls, reply: list[Any]) -> Expunged:
        """expunge.lua's reply: {outcome}."""
        return cls(ExpungeOutcome(reply[0]))


class CancelOutcome(StrEnum):
    """What schedule_cancel.lua answers."""

    CANCELLED = "cancelled"  # ScheduleCancelled.count deliveries ended
    NONE = "none"  # none of its deliveries is scheduled (any more): nothing done
    MISSING = "missing"  # no such event in Redis, or one sent with another key than the sender's


@dataclass(frozen=True)
class ScheduleCancelArgs:
    """schedule_cancel.lua's arguments, in the order its head names them."""

    event_id: str
    now_ms: int
    sender: str | None  # the API key id the event must have been sent with; None: any

    def keys(self) -> list[str]:
        return [keys.event(self.event_id)]

    def argv(self) -> list[str | int | float]:
        return [self.event_id, self.now_ms, self.sender or "", CANCELLED]


@dataclass(frozen=True)
class ScheduleCancelled:
    outcome: CancelOutcome
    count: int = 0

    @classmethod
    def parse(cls, reply: list[Any]) -> ScheduleCancelled:
        """schedule_cancel.lua's reply: {'cancelled', n} or {why}."""
        outcome = CancelOutcome(reply[0])
        return cls(outcome, int(reply[1]) if outcome is CancelOutcome.CANCELLED else 0)


@dataclass(frozen=True)
class EventRecord:
    id: str
    type: str
    created_ms: int
    body: str | None
    key_id: str
    delivery_ids: list[str]
    application: str | None = None  # None: an operational event
    # Redis lets them go after the fan-out: a record read from Redis has none, the log's has.
    channels: tuple[str, ...] = ()
    example: bool = False  # sent to one endpoint as an example (IngestArgs.only_endpoint)
    deliver_at_ms: int | None = None  # when its deliveries were due (IngestArgs'), if set


class EventStore:
    def __init__(self, redis: Redis, scripts: Scripts) -> None:
        self._redis = redis
        self._scripts = scripts

    async def accept(
        self,
        *,
        event_id: str,
        event_type: str,
        body: str,
        key_id: str,
        now_ms: int,
        budget: int,
        grace_ms: int,
        idempotency: IdempotencyClaim | None,
        wakeup: InlineWakeup | None,
        backlog_max: int,
        app_id: str = DEFAULT_APP_ID,
        channels: tuple[str, ...] = (),
        create_app: NewApplication | None = None,
        only_endpoint: str | None = None,
        filter_version: int | None = None,
        filtered_out: tuple[str, ...] = (),
        deliver_at_ms: int | None = None,
        traceparent: str | None = None,
    ) -> Accepted:
        """Store the event (an id of ``app_id``'s mark) in ``app_id`` and fan it out to that
        application's endpoints that take its type and channels. ``create_app`` is made
        with it when ``app_id`` does not exist, as the default application always is;
        another missing one is NO_APP. The application's rate_limit answers THROTTLED,
        after the idempotency check (a repeat is never throttled). ``app_id`` defaults to
        the default application: the one of a caller bound to none. ``only_endpoint``: an
        example for that endpoint alone (NO_ENDPOINT when it is not ``app_id``'s).
        ``filtered_out``: endpoints left out by their filters, evaluated at
        ``filter_version`` (STALE when that is no longer the application's).
        ``deliver_at_ms``: its deliveries are due then, if that is later than ``now_ms``.
        ``traceparent``: kept with the event, for its attempts' spans to link to."""
        args = IngestArgs(
            now_ms, event_id, event_type, body, key_id, budget, grace_ms, idempotency, wakeup,
            backlog_max, app_id, channels, create_app, only_endpoint, filter_version,
            filtered_out, deliver_at_ms, traceparent,
        )  # fmt: skip
        return Accepted.parse(await self._scripts.run("ingest", args.keys(), args.argv()), args)

    async def settle_idempotency(self, claim: IdempotencyClaim, *, app_id: str) -> None:
        """The first request finished: later ones with the same key replay it."""
        await self._redis.hset(keys.idempotency(app_id, claim.key_id, claim.key), "state", "done")

    async def get(self, event_id: str) -> EventRecord | None:
        raw = cast(dict[str, str], await self._redis.hgetall(keys.event(event_id)))
        if not raw:
            return None
        return EventRecord(
            id=event_id,
            type=raw["type"],
            created_ms=int(raw["created"]) if raw.get("created") else id_time_ms(event_id),
            body=raw.get("body"),
            key_id=raw.get("key", ""),
            delivery_ids=event_deliveries(event_id, raw.get("dlvs")),
            application=raw.get("app") or None,
            channels=tuple(orjson.loads(raw["ch"])) if raw.get("ch") else (),
            example=raw.get("example") == "1",
            deliver_at_ms=int(raw["at"]) if raw.get("at") else None,
        )

    async def replay(
        self,
        event_id: str,
        endpoint_id: str | None,
        now_ms: int,
        budget: int,
        grace_ms: int,
        *,
        sender: str | None,
        filter_version: int | None = None,
        filtered_out: tuple[str, ...] = (),
    ) -> Replayed:
        """New deliveries of a stored event: to every endpoint of its application that
        takes it now (its type, channels and filter: ``filtered_out`` evaluated at
        ``filter_version``, STALE when that is no longer the application's), or to one
        that does. ``sender``: only an event sent with this API key id counts (None:
        any)."""
        # Of the event's mark: the new deliveries are kept in its bucket.
        part = new_id("dlv", now_ms, mark=mark_of(event_id)).partition("_")[2]
        args = ReplayArgs(
            now_ms, event_id, part, budget, grace_ms, endpoint_id, sender, filter_version,
            filtered_out,
        )  # fmt: skip
        return Replayed.parse(await self._scripts.run("replay", args.keys(), args.argv()))

    async def expunge_payload(self, event_id: str, now_ms: int, *, sender: str | None) -> Expunged:
        """Delete the event's body; MISSING when there is no such event sent with the API
        key id ``sender`` (None: with any key)."""
        args = ExpungeArgs(event_id, now_ms, sender)
        return Expunged.parse(await self._scripts.run("expunge", args.keys(), args.argv()))

    async def cancel_schedule(
        self, event_id: str, now_ms: int, *, sender: str | None
    ) -> ScheduleCancelled:
        """End the event's scheduled deliveries not attempted yet (``failed``, last_error
        ``cancelled``); ``sender`` as for ``expunge_payload``."""
        args = ScheduleCancelArgs(event_id, now_ms, sender)
        reply = await self._scripts.run("schedule_cancel", args.keys(), args.argv())
        return ScheduleCancelled.parse(reply)
