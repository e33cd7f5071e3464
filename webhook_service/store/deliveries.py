"""Deliveries: leases, attempt records, retries, and reading them back."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, cast

import orjson
from redis.asyncio import Redis

from webhook_service.store import keys
from webhook_service.store.scripts import Scripts

Status = Literal["pending", "succeeded", "failed", "disabled"]
STATUSES: tuple[Status, ...] = ("pending", "succeeded", "failed", "disabled")


@dataclass(frozen=True)
class Job:
    """A leased delivery with everything needed to send it."""

    delivery_id: str
    attempt: int  # the number this attempt will have
    event_id: str
    endpoint_id: str
    body: str
    url: str
    sealed_secrets: str


@dataclass(frozen=True)
class LeaseResult:
    jobs: list[Job]
    skipped: dict[str, str]  # delivery id -> why it was not leased


@dataclass(frozen=True)
class Attempt:
    number: int
    started_ms: int
    duration_ms: int
    status_code: int | None
    error: str | None
    response_body: str

    def to_json(self) -> str:
        return orjson.dumps(
            {
                "n": self.number,
                "t": self.started_ms,
                "d": self.duration_ms,
                "c": self.status_code,
                "e": self.error,
                "b": self.response_body,
            }
        ).decode()

    @classmethod
    def from_json(cls, text: str) -> Attempt:
        raw = orjson.loads(text)
        return cls(raw["n"], raw["t"], raw["d"], raw["c"], raw["e"], raw["b"])


@dataclass(frozen=True)
class DeliveryRecord:
    id: str
    event_id: str
    endpoint_id: str
    event_type: str
    status: Status
    attempts: int
    next_at_ms: int | None
    created_ms: int
    updated_ms: int
    last_code: int | None
    last_error: str | None

    @classmethod
    def from_hash(cls, delivery_id: str, raw: dict[str, str]) -> DeliveryRecord:
        status: Status = raw["status"]  # type: ignore[assignment]
        return cls(
            id=delivery_id,
            event_id=raw["event"],
            endpoint_id=raw["endpoint"],
            event_type=raw["type"],
            status=status,
            attempts=int(raw["attempts"]),
            next_at_ms=int(raw["next_at"]) if status == "pending" else None,
            created_ms=int(raw["created"]),
            updated_ms=int(raw["updated"]),
            last_code=int(raw["code"]) if raw.get("code") else None,
            last_error=raw.get("error") or None,
        )


class DeliveryStore:
    def __init__(self, redis: Redis, scripts: Scripts) -> None:
        self._redis = redis
        self._scripts = scripts

    async def lease(
        self, ids: Sequence[str], token: str, now_ms: int, lease_ms: int
    ) -> LeaseResult:
        reply = await self._scripts.run("lease", [now_ms, token, lease_ms, *ids])
        jobs: list[Job] = []
        skipped: dict[str, str] = {}
        for row in reply:
            if row[1] == "go":
                jobs.append(Job(row[0], int(row[2]) + 1, row[3], row[4], row[5], row[6], row[7]))
            else:
                skipped[row[0]] = row[1]
        return LeaseResult(jobs, skipped)

    async def record(
        self,
        *,
        delivery_id: str,
        token: str,
        now_ms: int,
        attempt: Attempt,
        success: bool,
        delay_ms: int | None,
    ) -> tuple[str, int]:
        """Returns the delivery's new status and attempt count, or ('stale', 0)."""
        reply = await self._scripts.run(
            "record",
            [
                now_ms, token, delivery_id, attempt.to_json(),
                "1" if success else "0",
                -1 if delay_ms is None else delay_ms,
                "" if attempt.status_code is None else attempt.status_code,
                attempt.error or "",
            ],
        )  # fmt: skip
        return reply[0], int(reply[1]) if len(reply) > 1 else 0

    async def retry(self, delivery_id: str, now_ms: int, grace_ms: int) -> str:
        """'ok', 'pending' (already on its way) or 'missing'."""
        result: str = await self._scripts.run("retry", [now_ms, delivery_id, grace_ms])
        return result

    async def get(self, delivery_id: str) -> DeliveryRecord | None:
        raw = cast(dict[str, str], await self._redis.hgetall(keys.delivery(delivery_id)))
        return DeliveryRecord.from_hash(delivery_id, raw) if raw else None

    async def get_many(self, ids: Sequence[str]) -> list[DeliveryRecord]:
        async with self._redis.pipeline(transaction=False) as pipe:
            for delivery_id in ids:
                pipe.hgetall(keys.delivery(delivery_id))
            rows: list[dict[str, str]] = await pipe.execute()
        return [DeliveryRecord.from_hash(i, r) for i, r in zip(ids, rows, strict=True) if r]

    async def attempts(self, delivery_id: str) -> list[Attempt]:
        rows = cast(list[str], await self._redis.lrange(keys.attempts(delivery_id), 0, -1))
        return [Attempt.from_json(row) for row in rows]
