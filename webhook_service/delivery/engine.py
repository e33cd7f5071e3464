"""One batch of deliveries: lease, sign, send concurrently, record each attempt.

Redis is the truth: the wake-up that brought us here only carries ids, and everything the
send needs comes back from the lease, so a stale or repeated wake-up is harmless.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from signer import Signer
from webhook_service.crypto import SecretBox
from webhook_service.delivery.backoff import RetryPolicy, parse_retry_after
from webhook_service.delivery.transport import OutboundRequest, OutboundResponse, Transport
from webhook_service.store.deliveries import Attempt, DeliveryStore, Job
from webhook_service.store.endpoints import open_secrets
from webhook_service.timeutil import now_ms

log = logging.getLogger(__name__)

_SIGNER_CACHE_SIZE = 1024


@dataclass(frozen=True)
class Outcome:
    delivery_id: str
    status: str  # the delivery's status after this attempt, or why it was skipped
    attempt: int = 0


class DeliveryEngine:
    def __init__(
        self,
        store: DeliveryStore,
        transport: Transport,
        box: SecretBox,
        policy: RetryPolicy,
        *,
        lease_ms: int,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self._store = store
        self._transport = transport
        self._box = box
        self._policy = policy
        self._lease_ms = lease_ms
        self._clock = clock
        # Opening and parsing secrets costs more than signing: keep the ready signers, each
        # until the first of its rotated-out keys expires.
        self._signers: OrderedDict[tuple[str, str], tuple[Signer, float]] = OrderedDict()

    async def run(self, delivery_ids: Sequence[str]) -> list[Outcome]:
        token = secrets.token_hex(8)
        leased = await self._store.lease(delivery_ids, token, self._clock(), self._lease_ms)
        skipped = [Outcome(i, why) for i, why in leased.skipped.items()]
        sent = await asyncio.gather(*(self._deliver(job, token) for job in leased.jobs))
        return skipped + list(sent)

    def _signer(self, job: Job, now: int) -> Signer:
        cache_key = (job.endpoint_id, job.sealed_secrets)
        cached = self._signers.get(cache_key)
        if cached is not None and now < cached[1]:
            return cached[0]
        plain, valid_until = open_secrets(self._box, job.endpoint_id, job.sealed_secrets, now)
        signer = Signer(plain)
        self._signers[cache_key] = (signer, valid_until)
        if len(self._signers) > _SIGNER_CACHE_SIZE:
            self._signers.popitem(last=False)
        return signer

    async def _deliver(self, job: Job, token: str) -> Outcome:
        started = self._clock()
        body = job.body.encode()
        headers = self._signer(job, started).headers(job.event_id, started // 1000, body)
        headers["Content-Type"] = "application/json"
        response = await self._transport.send(OutboundRequest(job.url, headers, body))
        return await self._record(job, token, started, response)

    async def _record(
        self, job: Job, token: str, started: int, response: OutboundResponse
    ) -> Outcome:
        success = response.status is not None and 200 <= response.status < 300
        delay_ms: int | None = None
        if not success:
            retry_after = parse_retry_after(response.headers.get("Retry-After"), started / 1000)
            delay = self._policy.delay_after(
                job.attempt,
                status=response.status,
                error=response.error,
                retry_after=retry_after,
            )
            delay_ms = None if delay is None else int(delay * 1000)
        attempt = Attempt(
            number=job.attempt,
            started_ms=started,
            duration_ms=response.duration_ms,
            status_code=response.status,
            error=response.error,
            response_body=response.body.decode("utf-8", "replace"),
        )
        status, _ = await self._store.record(
            delivery_id=job.delivery_id,
            token=token,
            now_ms=self._clock(),
            attempt=attempt,
            success=success,
            delay_ms=delay_ms,
        )
        log.info(
            "attempt recorded",
            extra={
                "delivery_id": job.delivery_id,
                "event_id": job.event_id,
                "endpoint_id": job.endpoint_id,
                "attempt": job.attempt,
                "code": response.status,
                "error": response.error,
                "status": status,
            },
        )
        return Outcome(job.delivery_id, status, job.attempt)
