"""One attempt through the real lease and record scripts, as a worker makes it, without a
worker: for tests of what the store and the log do with its record."""

from __future__ import annotations

from redis.asyncio import Redis

from webhook_service.store.deliveries import (
    Attempt,
    AttemptOutcome,
    DeliveryStore,
    HealthPolicy,
    RecordOutcome,
)
from webhook_service.store.scripts import Scripts
from webhook_service.timeutil import now_ms

HEALTH = HealthPolicy(disable_after_ms=3_600_000, ops_budget=3)


async def attempt_now(
    client: Redis, delivery_id: str, code: int, delay_ms: int | None = None
) -> RecordOutcome:
    """Lease ``delivery_id``, then record an answer ``code`` (2xx: a success); a failure is
    tried again ``delay_ms`` later, or never (None). The delivery's status after it."""
    store = DeliveryStore(client, Scripts(client))
    now = now_ms()
    lease = await store.lease([delivery_id], "tok", now, 30_000, 10)
    assert len(lease.jobs) == 1, lease.skipped
    (job,) = lease.jobs
    recorded = await store.record(
        delivery_id=delivery_id, token="tok", now_ms=now,
        attempt=Attempt(job.attempt, now, 3, code, None, ""),
        outcome=AttemptOutcome.OK if code < 300 else AttemptOutcome.FAIL, delay_ms=delay_ms,
        health=HEALTH,
    )  # fmt: skip
    return recorded.status
