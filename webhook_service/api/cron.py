"""POST /v1/cron/tick: one bounded batch of the scheduler's and the workers' work, inline.

For hosts that sleep when idle and keep no workers running: an outside clock calls this
route, and each call claims what has come due (first attempts, retries, expired leases),
sends it through a delivery engine in this process and records every attempt, as a worker
would, then ships the log and keeps its retention, as the scheduler's shipper would. The
lease taken before every send already keeps two senders off one delivery; a Redis lock on
top turns an overlapping second tick away at once (409) instead of letting two ticks race
for one batch.

The route has its own bearer secret (WEBHOOK_CRON_SECRET), not an API key: a scheduler on
another platform holds it, and it can do nothing but this. While it is unset the route
answers 404 like any path the service does not have.
"""

from __future__ import annotations

import asyncio
import hmac
import math
from collections import Counter
from collections.abc import AsyncIterator, Iterable
from contextlib import suppress
from dataclasses import asdict, dataclass

import redis.exceptions
import sqlalchemy as sa
from aiohttp import web
from pydantic import SecretStr
from redis.asyncio import Redis

from webhook_service.api.body import read_body
from webhook_service.api.context import SERVICES, services
from webhook_service.api.pagination import limit_param
from webhook_service.api.problems import ProblemError
from webhook_service.config import Settings
from webhook_service.delivery.engine import UNRECORDED, DeliveryEngine, Result
from webhook_service.delivery.policy import MAX_TIMEOUT_SECONDS
from webhook_service.history.database import sync_engine
from webhook_service.history.shipper import Shipper
from webhook_service.store import keys
from webhook_service.store.connect import RedisTimeouts, sync_client
from webhook_service.store.deliveries import LeaseSkip, RecordOutcome
from webhook_service.store.due import claim_due, count_due
from webhook_service.store.scripts import Scripts
from webhook_service.timeutil import now_ms
from webhook_service.wiring import ConfigurationError, aiohttp_transport, delivery_engine

PATH = "/v1/cron/tick"
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
MIN_SECRET_LENGTH = 16
_IGNORED_BODY_BYTES = 1024
# Outbox batches one tick ships at most (WEBHOOK_LOG_BATCH_SIZE records each).
_SHIP_BATCHES = 10
# The shortest a tick's claim holds a delivery for its lease (Ticker._hold_ms).
MIN_CLAIM_HOLD_SECONDS = 1.0

# Engine result statuses, as the summary counts them. Anything else (already done, leased
# by a worker, not due yet) was not this tick's to count. Failed or disabled by its attempt,
# or by the lease that found its endpoint or payload gone, or its endpoint disabled.
_FINISHED_UNDELIVERED: frozenset[str] = frozenset(
    {RecordOutcome.FAILED, RecordOutcome.DISABLED, LeaseSkip.FAILED, LeaseSkip.DISABLED}
)
# Tried and failed with tries left, held back by the endpoint's or the application's
# concurrency or the endpoint's rate limit, or sent while the store refused its record (sent
# again once its lease has run out).
_LATER: frozenset[str] = frozenset(
    {RecordOutcome.PENDING, LeaseSkip.BUSY, LeaseSkip.APP_BUSY, LeaseSkip.THROTTLED, UNRECORDED}
)

routes = web.RouteTableDef()


@dataclass(frozen=True)
class TickSummary:
    delivered: int
    failed: int
    rescheduled: int
    remaining: int  # due now and not handled: the next tick's work

    @classmethod
    def of(cls, results: Iterable[Result], remaining: int) -> TickSummary:
        counts = Counter(result.status for result in results)
        return cls(
            delivered=counts[RecordOutcome.SUCCEEDED],
            failed=sum(counts[s] for s in _FINISHED_UNDELIVERED),
            rescheduled=sum(counts[s] for s in _LATER),
            remaining=remaining,
        )


class Ticker:
    def __init__(
        self, client: Redis, engine: DeliveryEngine, shipper: Shipper, settings: Settings
    ) -> None:
        self._redis = client
        self._shipper = shipper
        self._scripts = Scripts(client)
        self._engine = engine
        self._batch = settings.batch_size
        # One engine batch finishes within its longest lease (every send is bounded by its
        # endpoint's timeout, at most MAX_TIMEOUT_SECONDS, which that lease adds); the lock
        # is renewed after each, so it outlives the tick only if we die.
        self.lock_seconds = settings.lease_seconds + MAX_TIMEOUT_SECONDS
        # How far a claim moves each due time ahead (store/due.py) until the lease, a moment
        # later, moves it on: the wake-up grace, but never 0 (tick mode's, so that new
        # deliveries are due at once), lest the next batch of this tick claim again what a
        # lease left due (one another sender holds). A lease that never comes (the store
        # refused it) leaves them due again that soon.
        self._hold_ms = int(max(settings.wakeup_grace, MIN_CLAIM_HOLD_SECONDS) * 1000)

    async def tick(self, limit: int) -> TickSummary | None:
        """None when another tick holds the lock."""
        lock = self._redis.lock(keys.TICK_LOCK, timeout=self.lock_seconds, blocking=False)
        if not await lock.acquire():
            return None
        results: list[Result] = []
        try:
            budget = limit
            while budget > 0:
                claimed = await claim_due(
                    self._scripts, now_ms(), min(budget, self._batch), self._hold_ms
                )
                if not claimed:
                    break
                budget -= len(claimed)
                results += await self._engine.run(claimed.ids)
                await lock.reacquire()
            # Before the answer: a tick's process may be idle for long after it.
            await self._engine.add_counts()
            # The scheduler's other chore: without a scheduler, the log is shipped here.
            await self._ship()
            remaining = await count_due(self._redis, now_ms())
        finally:
            with suppress(redis.exceptions.RedisError):
                await lock.release()  # if not, it expires by itself
        return TickSummary.of(results, remaining)

    async def _ship(self) -> None:
        """The outbox into SQL, in the shipper's own thread, a few batches at most, then the
        log's upkeep (partitions, retention) when due: a log database that is away leaves
        the records for the next tick, not an error."""
        try:
            for _ in range(_SHIP_BATCHES):
                if await asyncio.to_thread(self._shipper.ship_batch) < self._shipper.batch_size:
                    break
            await asyncio.to_thread(self._shipper.upkeep)
        except sa.exc.SQLAlchemyError as exc:
            Shipper.sql_trouble(exc)


TICKER = web.AppKey("ticker", Ticker)


async def ticker_context(app: web.Application) -> AsyncIterator[None]:
    """Builds the engine only where tick mode is on: its HTTP session belongs to this loop."""
    svc = app[SERVICES]
    secret = svc.settings.cron_secret
    if secret is None:
        yield
        return
    if len(secret.get_secret_value()) < MIN_SECRET_LENGTH:
        # An empty or short secret would open the route to guessing, or to anyone at all.
        raise ConfigurationError(
            f"WEBHOOK_CRON_SECRET must be at least {MIN_SECRET_LENGTH} characters; "
            "make one with `openssl rand -hex 32`."
        )
    transport = aiohttp_transport(svc.settings)
    engine = delivery_engine(svc.settings, svc.redis, transport)
    sync_redis = sync_client(svc.settings.effective_redis_url, RedisTimeouts.of(svc.settings))
    log_engine = sync_engine(svc.settings)
    shipper = Shipper(sync_redis, log_engine, svc.settings)
    app[TICKER] = Ticker(svc.redis, engine, shipper, svc.settings)
    try:
        yield
    finally:
        await transport.close()
        log_engine.dispose()
        sync_redis.close()


def _check_bearer(request: web.Request, secret: SecretStr) -> None:
    scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
    expected = secret.get_secret_value().encode()
    # compare_digest on bytes: constant time for any input, ASCII or not.
    if scheme.lower() != "bearer" or not hmac.compare_digest(presented.strip().encode(), expected):
        raise ProblemError(
            401,
            "Send the cron secret as 'Authorization: Bearer <WEBHOOK_CRON_SECRET>'.",
            headers={"WWW-Authenticate": 'Bearer realm="cron"'},
        )


@routes.post(PATH)
async def tick(request: web.Request) -> web.Response:
    secret = services(request).settings.cron_secret
    if secret is None:
        raise web.HTTPNotFound()
    _check_bearer(request, secret)
    if request.body_exists:
        # The tick takes no body, but outside clocks often send one ("{}"): read it whole,
        # small and in bounded time, so it cannot hold the connection open after the answer.
        await read_body(request, _IGNORED_BODY_BYTES)
    limit = limit_param(request, DEFAULT_LIMIT, MAX_LIMIT)
    ticker = request.app[TICKER]
    summary = await ticker.tick(limit)
    if summary is None:
        raise ProblemError(
            409,
            "Another tick is running; this one did nothing.",
            kind="tick-in-progress",
            headers={"Retry-After": str(math.ceil(ticker.lock_seconds))},
        )
    return web.json_response(asdict(summary))
