"""Accepting events: the one atomic step behind every 202, and reading events back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, cast

from redis.asyncio import Redis

from webhook_service.ids import event_deliveries, id_time_ms, new_id
from webhook_service.store import keys
from webhook_service.store.scripts import Scripts


@dataclass(frozen=True)
class IdempotencyClaim:
    key_id: str  # the caller's API key id: keys are scoped to the caller
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


@dataclass(frozen=True)
class Accepted:
    # backlog_full: the log outbox holds `backlog_max` records; nothing was stored.
    outcome: Literal["created", "replay", "mismatch", "in_flight", "backlog_full"]
    event_id: str = ""
    event_type: str = ""
    created_ms: int = 0
    delivery_ids: tuple[str, ...] = ()  # the pending ones
    fanout: int = 0
    woken: bool = False  # their wake-ups are queued already (InlineWakeup)


@dataclass(frozen=True)
class Replayed:
    outcome: Literal[
        "ok", "missing", "no_payload", "no_endpoint", "not_subscribed", "endpoint_disabled"
    ]
    delivery_ids: tuple[str, ...] = ()
    pending: tuple[str, ...] = ()  # the ones to wake; a disabled endpoint's wait


@dataclass(frozen=True)
class EventRecord:
    id: str
    type: str
    created_ms: int
    body: str | None
    key_id: str
    delivery_ids: list[str]


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
    ) -> Accepted:
        idem = idempotency
        reply = await self._scripts.run(
            "ingest",
            [
                now_ms, event_id, event_type, body, key_id,
                keys.idempotency(idem.key_id, idem.key) if idem else "",
                idem.fingerprint if idem else "",
                idem.ttl_s if idem else 0,
                idem.state if idem else "",
                idem.until_ms if idem else 0,
                budget, grace_ms,
                wakeup.queue if wakeup else "", wakeup.template if wakeup else "",
                wakeup.batch if wakeup else 0,
                idem.key if idem else "",
                backlog_max,
            ],
        )  # fmt: skip
        outcome = reply[0]
        if outcome == "created":
            # Only pending deliveries need a worker; a disabled endpoint's wait for recovery.
            pending = tuple(reply[2])
            fanout = len(reply[1])
            return Accepted("created", event_id, event_type, now_ms, pending, fanout, bool(wakeup))
        if outcome == "replay":
            return Accepted("replay", reply[1], reply[2], int(reply[3]), (), int(reply[4]))
        return Accepted(outcome)

    async def settle_idempotency(self, claim: IdempotencyClaim) -> None:
        """The first request finished: later ones with the same key replay it."""
        await self._redis.hset(keys.idempotency(claim.key_id, claim.key), "state", "done")

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
    ) -> Replayed:
        """New deliveries of a stored event: to every endpoint subscribed now, or to one
        that is. ``sender``: only an event sent with this API key id counts (None: any)."""
        # A replay's ids begin with its own time and randomness where an original's begin
        # with the event's (ids.delivery_id), so the two never collide.
        part = new_id("dlv", now_ms).partition("_")[2]
        reply = await self._scripts.run(
            "replay", [now_ms, event_id, part, budget, grace_ms, endpoint_id or "", sender or ""]
        )
        if reply[0] != "ok":
            return Replayed(reply[0])
        return Replayed("ok", tuple(reply[1]), tuple(reply[2]))

    async def expunge_payload(self, event_id: str, now_ms: int, *, sender: str | None) -> bool:
        """Delete the event's body; False when there is no such event sent with the API key
        id ``sender`` (None: with any key)."""
        return bool(await self._scripts.run("expunge", [event_id, now_ms, sender or ""]))
