"""One batch of deliveries: lease, sign, send concurrently, record each attempt.

Redis is the truth: the wake-up that brought us here only carries ids, and everything the
send needs comes back from the lease, so a stale or repeated wake-up is harmless.

A worker hands a wake-up over with ``start``: it returns once the batch is leased, while the
sends go on in the background, up to ``max_in_flight`` per process. So a receiver that hangs
holds a few sends (the per-endpoint cap in the lease), never the worker that serves the
others. A process that dies mid-send loses nothing: its leases expire and the scheduler
wakes those deliveries again.

The receiver has seen an attempt once its POST is answered, so recording it outlasts a
store that refuses (``_record_attempt``); a refused lease is the caller's to wait out.

What the recorded attempts add to the metrics and the endpoints' windows is counted here
and added to Redis ``counts_interval`` after the first attempt not yet added, and when the
engine drains (store/counts.py says why not in the record script).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from multidict import CIMultiDict

from signer import Signer
from webhook_service import tracing
from webhook_service.crypto import SecretBox
from webhook_service.delivery.backoff import RetryPolicy, parse_retry_after
from webhook_service.delivery.transport import (
    USER_AGENT,
    OutboundRequest,
    OutboundResponse,
    Transport,
    recorded_headers,
)
from webhook_service.log_window import LineWindow
from webhook_service.redaction import Redactor
from webhook_service.store.counts import AttemptCounts
from webhook_service.store.deliveries import (
    Attempt,
    AttemptOutcome,
    DeliveryStore,
    HealthPolicy,
    Job,
    LeaseResult,
    NextLease,
    Recorded,
    RecordOutcome,
)
from webhook_service.store.endpoints import decode_headers, open_headers, open_secrets
from webhook_service.store.refusals import Backoff, refused
from webhook_service.timeutil import now_ms

log = logging.getLogger(__name__)
# Attempts the store refused to record for a whole lease: one line a minute tells them.
_unrecorded = LineWindow()
UNRECORDED = "unrecorded"

_CACHE_SIZE = 1024

# An attempt's record holds the headers we sent and those we got, and the log keeps them for
# the retention period, readable by every `deliveries:read` key and on the dashboard. The
# endpoint's own header values are often the receiver's credentials (an Authorization a
# subscriber asked us to send), sealed in Redis and never shown by the API: the record
# names them with this value instead. Our webhook-signature is kept: it is an HMAC of this
# one message and its timestamp, which proves nothing about any other message (Svix shows
# it too), and it lets a reader check what was signed.
REDACTED = "[redacted]"
# Answer headers whose values are credentials whoever sends them: a session a receiver
# opens for us, and the request credentials an echoing receiver sends back. Challenges
# (WWW-Authenticate, Proxy-Authenticate) hold none and tell why a 401 came: kept.
SECRET_ANSWER_HEADERS = frozenset({"set-cookie", "cookie", "authorization", "proxy-authorization"})


@dataclass(frozen=True)
class _Credentials:
    """What a send to one endpoint carries besides the event, opened from the sealed store."""

    signer: Signer
    headers: CIMultiDict[str]  # the endpoint's own, often the receiver's credentials
    # Masks those values (and bearer tokens, our key shapes) wherever an answer repeats them
    # (a Bearer challenge loses its first parameter to the token rule: better than a token).
    redactor: Redactor
    valid_until: float  # when the first rotated-out key expires: open them again then

    def answer_value(self, name: str, value: str) -> str:
        """What an attempt's record keeps of one answer header's value."""
        return REDACTED if name in SECRET_ANSWER_HEADERS else self.redactor(value)


@dataclass(frozen=True)
class Result:
    delivery_id: str
    # The delivery's status after this attempt (RecordOutcome), why it was skipped
    # (LeaseSkip), or UNRECORDED.
    status: str
    attempt: int = 0


class DeliveryEngine:
    def __init__(
        self,
        store: DeliveryStore,
        transport: Transport,
        box: SecretBox,
        policy: RetryPolicy,
        health: HealthPolicy,
        *,
        lease_ms: int,
        request_timeout: float,
        endpoint_concurrency: int = 10,
        max_in_flight: int = 100,
        counts_interval: float = 1.0,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self._store = store
        self._transport = transport
        self._box = box
        self._policy = policy
        self._health = health
        self._lease_ms = lease_ms
        self._request_timeout = request_timeout
        self._endpoint_concurrency = endpoint_concurrency
        self._max_in_flight = max_in_flight
        self._clock = clock
        self._sending: set[asyncio.Task[Result]] = set()
        self._counts = AttemptCounts()
        self._counts_interval = counts_interval
        self._counts_due: asyncio.TimerHandle | None = None
        self._adding: set[asyncio.Task[None]] = set()
        # Opening and parsing secrets costs more than signing: keep what was opened, each
        # until the first of its rotated-out keys expires.
        self._opened: OrderedDict[tuple[str, str, str], _Credentials] = OrderedDict()

    async def run(self, delivery_ids: Sequence[str]) -> list[Result]:
        """Lease, send and record the whole batch before returning."""
        skipped, tasks = await self._lease_and_send(delivery_ids, chain=False)
        return skipped + list(await asyncio.gather(*tasks))

    async def start(self, delivery_ids: Sequence[str]) -> list[Result]:
        """Lease the batch and return; the sends finish in the background."""
        while len(self._sending) >= self._max_in_flight:
            await asyncio.wait(self._sending, return_when=asyncio.FIRST_COMPLETED)
        skipped, _ = await self._lease_and_send(delivery_ids, chain=True)
        return skipped

    async def drain(self, grace: float) -> int:
        """Give the sends in flight ``grace`` seconds to finish (shutdown), then add what
        their attempts counted; returns how many did not finish in time."""
        pending: set[asyncio.Task[Result]] = set()
        if self._sending:
            _, pending = await asyncio.wait(self._sending, timeout=grace)
        await self.add_counts()
        return len(pending)

    async def add_counts(self) -> None:
        """Add what the recorded attempts counted to Redis now (a tick does, before it
        answers); a batch the store refuses waits for the next."""
        if self._counts_due is not None:
            self._counts_due.cancel()
            self._counts_due = None
        batch = self._counts.take()
        if not batch:
            return
        try:
            await self._store.add_counts(batch)
        except Exception as exc:
            self._counts.put_back(batch)
            if not refused(exc, "adding attempt counts"):
                log.warning("attempt counts not added; kept for the next try", exc_info=True)
            self._count_later()

    def _count(self, job: Job, attempt: Attempt, recorded: Recorded, now: int) -> None:
        self._counts.note(
            endpoint_id=job.endpoint_id,
            status_class=attempt.status_class,
            status=recorded.status,
            duration_ms=attempt.duration_ms,
            latency_ms=now - recorded.created_ms,
            code=attempt.status_code,
            error=attempt.error,
            now_ms=now,
        )
        self._count_later()

    def _count_later(self) -> None:
        if self._counts_due is None:
            self._counts_due = asyncio.get_running_loop().call_later(
                self._counts_interval, self._add_counts_soon
            )

    def _add_counts_soon(self) -> None:
        self._counts_due = None
        task = asyncio.create_task(self.add_counts())
        self._adding.add(task)
        task.add_done_callback(self._adding.discard)

    async def _lease_and_send(
        self, delivery_ids: Sequence[str], *, chain: bool
    ) -> tuple[list[Result], list[asyncio.Task[Result]]]:
        """``chain``: when a send frees an endpoint slot that a parked delivery waits for,
        lease and send that one at once, rather than leaving it to the scheduler."""
        token = secrets.token_hex(8)
        leased_ms = self._clock()
        lease_started = tracing.now_ns()
        leased = await self._store.lease(
            delivery_ids, token, leased_ms, self._lease_ms, self._endpoint_concurrency
        )
        timing = tracing.Leased(lease_started, tracing.now_ns())
        return self._send_leased(leased, token, leased_ms, chain, timing)

    def _send_leased(
        self, leased: LeaseResult, token: str, leased_ms: int, chain: bool, timing: tracing.Leased
    ) -> tuple[list[Result], list[asyncio.Task[Result]]]:
        """``timing``: when the lease call (or the record that leased them) ran, which each
        attempt's span shows as its lease."""
        skipped = [Result(i, why) for i, why in leased.skipped.items()]
        tasks = [
            asyncio.create_task(
                self._deliver(job, token, leased_ms + job.lease_ms(self._lease_ms), chain, timing)
            )
            for job in leased.jobs
        ]
        for task in tasks:
            self._sending.add(task)
            task.add_done_callback(self._sent)
        return skipped, tasks

    def _sent(self, task: asyncio.Task[Result]) -> None:
        self._sending.discard(task)
        if not task.cancelled() and task.exception() is not None:
            # Most likely Redis went away before the attempt was recorded: the lease runs
            # out and the scheduler wakes the delivery again.
            log.warning("attempt not recorded", exc_info=task.exception())

    def _credentials(self, job: Job, now: int) -> _Credentials:
        # The sealed text is in the key: a rotation or a header change opens afresh.
        cache_key = (job.endpoint_id, job.sealed_secrets, job.sealed_headers)
        cached = self._opened.get(cache_key)
        if cached is not None and now < cached.valid_until:
            return cached
        plain, valid_until = open_secrets(self._box, job.endpoint_id, job.sealed_secrets, now)
        headers = open_headers(self._box, job.endpoint_id, decode_headers(job.sealed_headers))
        opened = _Credentials(
            Signer(plain), CIMultiDict(headers), Redactor(headers.values()), valid_until
        )
        self._opened[cache_key] = opened
        if len(self._opened) > _CACHE_SIZE:
            self._opened.popitem(last=False)
        return opened

    async def _deliver(
        self, job: Job, token: str, until_ms: int, chain: bool, timing: tracing.Leased
    ) -> Result:
        """``until_ms``: when the lease taken for this send runs out."""
        of = tracing.AttemptOf(
            job.delivery_id, job.event_id, job.endpoint_id, job.attempt, job.traceparent
        )
        with tracing.attempt(of, timing) as traced:
            result = await self._attempt(job, token, until_ms, chain, traced)
            traced.recorded(result.status)
            return result

    async def _attempt(
        self, job: Job, token: str, until_ms: int, chain: bool, traced: tracing.AttemptTrace
    ) -> Result:
        started = self._clock()
        if (
            job.ordered
            and started + 1000 * (job.timeout_seconds or self._request_timeout) > until_ms
        ):
            # A FIFO head whose send could outlast its lease (this process stalled since it
            # leased it): another worker may lease it then, and send the next one while this
            # send is still going. Left to its lease's end, to be sent again then.
            log.warning("lease too short to send in order", extra={"delivery_id": job.delivery_id})
            return Result(job.delivery_id, UNRECORDED, job.attempt)
        with traced.step("sign"):
            body = job.body.encode()
            credentials = self._credentials(job, started)
            ours = CIMultiDict(credentials.signer.headers(job.event_id, started // 1000, body))
            ours["Content-Type"] = "application/json"
            if job.send_traceparent:
                # The attempt's span; with traces off, the producer's as it came, if any.
                traceparent = traced.traceparent() or job.traceparent
                if traceparent is not None:
                    ours[tracing.TRACEPARENT] = traceparent
            # Our User-Agent unless the endpoint sets its own; then the endpoint's own
            # headers; then ours win: the API forbids it to set them, but for traceparent,
            # which only send_traceparent makes ours (names are case-insensitive).
            headers = CIMultiDict({"User-Agent": USER_AGENT})
            headers.update(credentials.headers)
            headers.update(ours)
            sent = {
                name.lower(): REDACTED
                if name in credentials.headers and name not in ours
                else value
                for name, value in headers.items()
            }
        with traced.step("send"):
            response = await self._transport.send(
                OutboundRequest(job.url, headers, body, timeout=job.timeout_seconds)
            )
        traced.sent(response.status, response.duration_ms, response.error)
        # With ``chain``, the record also leases the delivery parked for the slot this send
        # frees, and this worker sends it next; without, the scheduler takes it over.
        next_lease = None
        if chain:
            next_lease = NextLease(secrets.token_hex(8), self._lease_ms, self._endpoint_concurrency)
        answered = recorded_headers(response.headers, credentials.answer_value)
        # An echoing receiver answers with the request, the endpoint's own credentials in it.
        answer_body = credentials.redactor(response.body.decode("utf-8", "replace"))
        record_started = tracing.now_ns()
        with traced.step("record"):
            stored = await self._record(
                job, token, until_ms, started, response, sent, (answered, answer_body), next_lease
            )
        if stored is None:
            return Result(job.delivery_id, UNRECORDED, job.attempt)
        recorded, recorded_ms = stored
        if next_lease is not None and recorded.next is not None:
            # Leased by the record script, at the time that try gave it.
            timing = tracing.Leased(record_started, tracing.now_ns())
            self._send_leased(recorded.next, next_lease.token, recorded_ms, chain, timing)
        return Result(job.delivery_id, recorded.status, job.attempt)

    async def _record(
        self,
        job: Job,
        token: str,
        until_ms: int,
        started: int,
        response: OutboundResponse,
        sent: dict[str, str],
        answered: tuple[dict[str, str], str],
        next_lease: NextLease | None,
    ) -> tuple[Recorded, int] | None:
        """The attempt's record and when it was made, or None if the store never took it.
        ``sent``: the request's headers as recorded; ``answered``: the answer's headers and
        body as recorded (credentials masked)."""
        outcome = AttemptOutcome.FAIL
        if response.status is not None and 200 <= response.status < 300:
            outcome = AttemptOutcome.OK
        elif response.status == 410:
            outcome = AttemptOutcome.GONE
        delay_ms: int | None = None
        if outcome is AttemptOutcome.FAIL:
            retry_after = parse_retry_after(response.headers.get("Retry-After"), started / 1000)
            # The endpoint's schedule as it is now: a change applies from the next attempt.
            delay = self._policy.for_schedule(job.retry_schedule).delay_after(
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
            response_body=answered[1],
            request_headers=sent,
            response_headers=answered[0],
        )
        stored = await self._record_attempt(
            job, token, until_ms, attempt, outcome, delay_ms, next_lease
        )
        if stored is None:
            return None
        recorded, recorded_ms = stored
        if recorded.status is not RecordOutcome.STALE:
            self._count(job, attempt, recorded, recorded_ms)
        log.info(
            "attempt recorded",
            extra={
                "delivery_id": job.delivery_id,
                "event_id": job.event_id,
                "endpoint_id": job.endpoint_id,
                "attempt": job.attempt,
                "code": response.status,
                "error": response.error,
                "status": recorded.status,
            },
        )
        return stored

    async def _record_attempt(
        self,
        job: Job,
        token: str,
        until_ms: int,
        attempt: Attempt,
        outcome: AttemptOutcome,
        delay_ms: int | None,
        next_lease: NextLease | None,
    ) -> tuple[Recorded, int] | None:
        """Record the attempt, trying again while the store refuses, as long as the lease
        holds; None if it never took it.

        Trying again is safe: the record script acts only for the lease's token and ends
        the lease, so a try that ran before its reply was lost makes the next one STALE,
        never a second record. Past the lease another sender may hold the delivery, so this
        one stops: the delivery comes back through its due entry at the lease's end and is
        sent again (a duplicate, with the same webhook-id), and this attempt goes unrecorded.
        """
        backoff = Backoff()
        while True:
            now = self._clock()
            try:
                recorded = await self._store.record(
                    delivery_id=job.delivery_id,
                    token=token,
                    now_ms=now,
                    attempt=attempt,
                    outcome=outcome,
                    delay_ms=delay_ms,
                    health=self._health,
                    next_lease=next_lease,
                    budget=len(job.retry_schedule or ()),
                )
                return recorded, now
            except Exception as exc:
                if not refused(exc, "recording an attempt"):
                    raise
            left_ms = until_ms - self._clock()
            if left_ms <= 0:
                _tell_unrecorded(job)
                return None
            await asyncio.sleep(min(backoff.next(), left_ms / 1000))


def _tell_unrecorded(job: Job) -> None:
    left_out = _unrecorded.admit(UNRECORDED)
    if left_out is None:
        return
    more = f"; {left_out} more since the last such line" if left_out else ""
    log.warning(
        "attempt sent but not recorded: the store refused it until the lease ran out; the "
        "delivery is sent again when its due entry comes up%s",
        more,
        extra={"delivery_id": job.delivery_id, "event_id": job.event_id},
    )
