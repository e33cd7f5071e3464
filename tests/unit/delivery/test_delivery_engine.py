"""DeliveryEngine: lease, sign, send, record -- with a fake store and a mock transport."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import Any, Self, cast
from unittest import mock

import pytest
import redis.exceptions
from aioresponses import aioresponses
from multidict import CIMultiDict
from standardwebhooks.webhooks import Webhook, WebhookVerificationError
from yarl import URL

from signer import generate_secret
from tests.support.mock_http import CompatResponse
from webhook_service.crypto import MasterKeyError, SecretBox, generate_master_key
from webhook_service.delivery.backoff import RetryPolicy
from webhook_service.delivery.engine import REDACTED, UNRECORDED, DeliveryEngine, Result
from webhook_service.delivery.ssrf import Guard
from webhook_service.delivery.transport import (
    OMITTED,
    RECORDED_HEADER_BYTES,
    USER_AGENT,
    AiohttpTransport,
    MockTransport,
    OutboundRequest,
    OutboundResponse,
)
from webhook_service.ids import delivery_id, new_id
from webhook_service.redaction import MASK
from webhook_service.store import keys
from webhook_service.store.counts import AttemptCounts
from webhook_service.store.deliveries import (
    Attempt,
    AttemptOutcome,
    DeliveryStore,
    HealthPolicy,
    Job,
    LeaseResult,
    LeaseSkip,
    Recorded,
    RecordOutcome,
)
from webhook_service.store.endpoints import (
    SealedSecret,
    encode_headers,
    encode_secrets,
    seal_headers,
)

NOW_MS = time.time_ns() // 1_000_000
ENDPOINT_ID = new_id("ep", NOW_MS - 60_000)
EVENT_ID = new_id("msg", NOW_MS)
DELIVERY_ID = delivery_id(EVENT_ID, ENDPOINT_ID)
URL_OK = "https://receiver.example.com/hook"
BODY = '{"type":"invoice.paid","data":{"id":"in_1","amount":4200}}'
HEALTH = HealthPolicy(disable_after_ms=86_400_000, ops_budget=3)
CREATED_MS = NOW_MS - 250  # when the fake store's deliveries were made


@dataclass
class FakeStore:
    """Duck-types DeliveryStore.lease / record and remembers every call."""

    jobs: list[Job]
    skipped: dict[str, LeaseSkip] = field(default_factory=dict)
    leases: list[tuple[list[str], str, int, int, int]] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    parked: list[Job] = field(default_factory=list)  # leased by a record that asks, one each
    counted: list[AttemptCounts] = field(default_factory=list)  # each batch added

    async def lease(
        self, ids: Sequence[str], token: str, now_ms: int, lease_ms: int, max_in_flight: int
    ) -> LeaseResult:
        self.leases.append((list(ids), token, now_ms, lease_ms, max_in_flight))
        return LeaseResult(list(self.jobs), dict(self.skipped))

    async def record(self, **kwargs: Any) -> Recorded:
        self.records.append(kwargs)
        number = kwargs["attempt"].number
        following = None
        if kwargs.get("next_lease") is not None and self.parked:
            following = LeaseResult([self.parked.pop(0)], {})
        if kwargs["outcome"] is AttemptOutcome.OK:
            return Recorded(RecordOutcome.SUCCEEDED, number, following, CREATED_MS)
        if kwargs["outcome"] is AttemptOutcome.GONE:
            return Recorded(RecordOutcome.DISABLED, number, following, CREATED_MS)
        if kwargs["delay_ms"] is None:
            return Recorded(RecordOutcome.FAILED, number, following, CREATED_MS)
        return Recorded(RecordOutcome.PENDING, number, following, CREATED_MS)

    async def add_counts(self, batch: AttemptCounts) -> None:
        self.counted.append(batch)

    def as_store(self) -> DeliveryStore:
        # A cast: the engine takes the concrete DeliveryStore (no Protocol), and calls only
        # the lease, record and add_counts this fake duck-types.
        return cast(DeliveryStore, self)


@pytest.fixture
def box() -> SecretBox:
    return SecretBox(generate_master_key())


def seal(box: SecretBox, *secrets: tuple[str, int | None], endpoint_id: str = ENDPOINT_ID) -> str:
    return encode_secrets([SealedSecret(box.seal(s, endpoint_id), exp) for s, exp in secrets])


def make_job(sealed: str, *, attempt: int = 1, **changes: Any) -> Job:
    fields: dict[str, Any] = {
        "delivery_id": DELIVERY_ID,
        "attempt": attempt,
        "event_id": EVENT_ID,
        "endpoint_id": ENDPOINT_ID,
        "body": BODY,
        "url": URL_OK,
        "sealed_secrets": sealed,
        "sealed_headers": "",
    }
    fields.update(changes)
    return Job(**fields)


class Receiver:
    """A MockTransport handler that answers from a script and keeps the requests."""

    def __init__(self, *answers: OutboundResponse) -> None:
        self.answers = list(answers) or [OutboundResponse(200, b"ok")]
        self.requests: list[OutboundRequest] = []

    def __call__(self, request: OutboundRequest) -> OutboundResponse:
        self.requests.append(request)
        return self.answers[min(len(self.requests), len(self.answers)) - 1]


def make_engine(
    store: FakeStore,
    box: SecretBox,
    handler: Callable[[OutboundRequest], Any],
    policy: RetryPolicy | None = None,
    clock: Callable[[], int] = lambda: NOW_MS,
    counts_interval: float = 1.0,
) -> DeliveryEngine:
    return DeliveryEngine(
        store.as_store(),
        MockTransport(handler),
        box,
        policy or RetryPolicy((0.0, 10.0, 20.0), jitter=0.0),
        HEALTH,
        lease_ms=30_000,
        request_timeout=15.0,
        counts_interval=counts_interval,
        clock=clock,
    )


class _AtNow(datetime):
    """standardwebhooks checks the timestamp against its own clock: hold that at NOW_MS, so
    the verdict does not depend on how long after collection a test runs."""

    @classmethod
    def now(cls, tz: tzinfo | None = None) -> Self:
        return cls.fromtimestamp(NOW_MS / 1000, tz)


def verify(secret: str, request: OutboundRequest) -> Any:
    with mock.patch("standardwebhooks.webhooks.datetime", _AtNow):
        return Webhook(secret).verify(request.body, dict(request.headers))


# -- the request ------------------------------------------------------------------------------


async def test_the_request_is_a_signed_standard_webhook(box: SecretBox) -> None:
    secret = generate_secret()
    store = FakeStore([make_job(seal(box, (secret, None)))])
    receiver = Receiver()
    await make_engine(store, box, receiver).run([DELIVERY_ID])

    [sent] = receiver.requests
    assert sent.url == URL_OK
    assert sent.body == BODY.encode()
    assert sent.headers["webhook-id"] == EVENT_ID
    assert sent.headers["webhook-timestamp"] == str(NOW_MS // 1000)
    assert sent.headers["Content-Type"] == "application/json"
    assert verify(secret, sent) == {"type": "invoice.paid", "data": {"id": "in_1", "amount": 4200}}


async def test_a_different_secret_does_not_verify(box: SecretBox) -> None:
    store = FakeStore([make_job(seal(box, (generate_secret(), None)))])
    receiver = Receiver()
    await make_engine(store, box, receiver).run([DELIVERY_ID])
    with pytest.raises(WebhookVerificationError):
        verify(generate_secret(), receiver.requests[0])


async def test_a_tampered_body_does_not_verify(box: SecretBox) -> None:
    secret = generate_secret()
    store = FakeStore([make_job(seal(box, (secret, None)))])
    receiver = Receiver()
    await make_engine(store, box, receiver).run([DELIVERY_ID])
    sent = receiver.requests[0]
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(sent.body.replace(b"4200", b"4201"), dict(sent.headers))


async def test_a_rotated_secret_still_in_grace_signs_too(box: SecretBox) -> None:
    new, old = generate_secret(), generate_secret()
    sealed = seal(box, (new, None), (old, NOW_MS + 3_600_000))
    receiver = Receiver()
    await make_engine(FakeStore([make_job(sealed)]), box, receiver).run([DELIVERY_ID])

    sent = receiver.requests[0]
    assert len(sent.headers["webhook-signature"].split(" ")) == 2
    verify(new, sent)
    verify(old, sent)


@pytest.mark.parametrize("expired_at", [NOW_MS - 1, NOW_MS, 0])
async def test_an_expired_rotated_secret_does_not_sign(box: SecretBox, expired_at: int) -> None:
    new, old = generate_secret(), generate_secret()
    sealed = seal(box, (new, None), (old, expired_at))
    receiver = Receiver()
    await make_engine(FakeStore([make_job(sealed)]), box, receiver).run([DELIVERY_ID])

    sent = receiver.requests[0]
    assert len(sent.headers["webhook-signature"].split(" ")) == 1
    verify(new, sent)
    with pytest.raises(WebhookVerificationError):
        verify(old, sent)


async def test_a_secret_sealed_for_another_endpoint_does_not_open(box: SecretBox) -> None:
    sealed = seal(box, (generate_secret(), None), endpoint_id="ep_someone_else")
    engine = make_engine(FakeStore([make_job(sealed)]), box, Receiver())
    with pytest.raises(MasterKeyError):
        await engine.run([DELIVERY_ID])


async def test_a_cached_signer_drops_the_old_secret_once_it_expires(box: SecretBox) -> None:
    new, old = generate_secret(), generate_secret()
    expires = NOW_MS + 1_000
    store = FakeStore([make_job(seal(box, (new, None), (old, expires)))])
    receiver = Receiver()
    now = [NOW_MS]
    engine = make_engine(store, box, receiver, clock=lambda: now[0])

    await engine.run([DELIVERY_ID])  # in grace: both sign
    now[0] = expires  # same sealed secrets, so the same cache entry, but the grace is over
    await engine.run([DELIVERY_ID])

    before, after = receiver.requests
    assert len(before.headers["webhook-signature"].split(" ")) == 2
    assert len(after.headers["webhook-signature"].split(" ")) == 1
    verify(new, after)
    with pytest.raises(WebhookVerificationError):
        verify(old, after)


# -- what gets recorded -----------------------------------------------------------------------


async def test_lease_gets_the_ids_clock_and_lease_length(box: SecretBox) -> None:
    store = FakeStore([make_job(seal(box, (generate_secret(), None)))])
    await make_engine(store, box, Receiver()).run([DELIVERY_ID, "dlv_other"])
    [(ids, token, now, lease_ms, per_endpoint)] = store.leases
    assert ids == [DELIVERY_ID, "dlv_other"]
    assert (now, lease_ms, per_endpoint) == (NOW_MS, 30_000, 10)
    # The lease token is what record() must present.
    assert store.records[0]["token"] == token
    assert token


@pytest.mark.parametrize("status", [200, 202, 204, 299])
async def test_2xx_records_success_with_no_delay(box: SecretBox, status: int) -> None:
    store = FakeStore([make_job(seal(box, (generate_secret(), None)), attempt=2)])
    receiver = Receiver(OutboundResponse(status, b"thanks", duration_ms=12))
    outcomes = await make_engine(store, box, receiver).run([DELIVERY_ID])

    assert outcomes == [Result(DELIVERY_ID, "succeeded", 2)]
    [record] = store.records
    assert record["outcome"] is AttemptOutcome.OK
    assert record["delay_ms"] is None
    assert record["delivery_id"] == DELIVERY_ID
    assert record["now_ms"] == NOW_MS
    attempt = record["attempt"]
    assert attempt == Attempt(
        number=2,
        started_ms=NOW_MS,
        duration_ms=12,
        status_code=status,
        error=None,
        response_body="thanks",
        request_headers=attempt.request_headers,  # below: the headers an attempt records
    )


@pytest.mark.parametrize(("status", "scheduled_ms"), [(500, 10_000), (404, 10_000), (301, 10_000)])
async def test_failure_records_the_policy_delay(
    box: SecretBox, status: int, scheduled_ms: int
) -> None:
    store = FakeStore([make_job(seal(box, (generate_secret(), None)), attempt=1)])
    receiver = Receiver(OutboundResponse(status, b"\xff oops"))
    outcomes = await make_engine(store, box, receiver).run([DELIVERY_ID])

    assert outcomes == [Result(DELIVERY_ID, "pending", 1)]
    [record] = store.records
    assert record["outcome"] is AttemptOutcome.FAIL
    assert record["delay_ms"] == scheduled_ms
    assert record["attempt"].status_code == status
    # Undecodable bytes are replaced, not fatal.
    assert record["attempt"].response_body == "\ufffd oops"


async def test_failure_delay_is_jittered_around_the_schedule(box: SecretBox) -> None:
    policy = RetryPolicy((0.0, 10.0, 20.0), jitter=0.2)
    for _ in range(30):
        store = FakeStore([make_job(seal(box, (generate_secret(), None)), attempt=2)])
        await make_engine(store, box, Receiver(OutboundResponse(500)), policy).run([DELIVERY_ID])
        assert 16_000 <= store.records[0]["delay_ms"] <= 24_000


async def test_the_spent_schedule_records_no_delay(box: SecretBox) -> None:
    # Three entries, and this is attempt 3: nothing is left.
    store = FakeStore([make_job(seal(box, (generate_secret(), None)), attempt=3)])
    outcomes = await make_engine(store, box, Receiver(OutboundResponse(500))).run([DELIVERY_ID])
    assert store.records[0]["outcome"] is AttemptOutcome.FAIL
    assert store.records[0]["delay_ms"] is None
    assert outcomes == [Result(DELIVERY_ID, "failed", 3)]


async def test_transport_errors_are_recorded_with_their_class(box: SecretBox) -> None:
    policy = RetryPolicy((0.0, 10.0, 20.0), jitter=0.0, throttle_floor=60.0)
    store = FakeStore([make_job(seal(box, (generate_secret(), None)), attempt=1)])
    receiver = Receiver(OutboundResponse(None, error="timeout", duration_ms=15_000))
    await make_engine(store, box, receiver, policy).run([DELIVERY_ID])
    [record] = store.records
    assert record["outcome"] is AttemptOutcome.FAIL
    assert record["attempt"].error == "timeout"
    assert record["attempt"].status_code is None
    assert record["attempt"].duration_ms == 15_000
    assert record["delay_ms"] == 60_000  # the throttle floor, not the 10 s schedule


async def test_retry_after_from_the_receiver_is_honoured(box: SecretBox) -> None:
    store = FakeStore([make_job(seal(box, (generate_secret(), None)), attempt=1)])
    receiver = Receiver(OutboundResponse(503, headers={"Retry-After": "15"}))
    await make_engine(store, box, receiver).run([DELIVERY_ID])
    # 10 s scheduled, 15 s asked, within the 2x cap.
    assert store.records[0]["delay_ms"] == 15_000


async def test_a_garbled_retry_after_is_still_recorded(box: SecretBox) -> None:
    store = FakeStore([make_job(seal(box, (generate_secret(), None)), attempt=1)])
    receiver = Receiver(OutboundResponse(503, headers={"Retry-After": "\u00b2"}))
    await make_engine(store, box, receiver).run([DELIVERY_ID])
    [record] = store.records
    assert record["outcome"] is AttemptOutcome.FAIL
    assert record["delay_ms"] == 10_000  # the header is ignored, the schedule stands


async def test_skipped_deliveries_are_reported_and_not_sent(box: SecretBox) -> None:
    store = FakeStore(
        [make_job(seal(box, (generate_secret(), None)))],
        skipped={"dlv_gone": LeaseSkip.GONE, "dlv_done": LeaseSkip.DONE},
    )
    receiver = Receiver()
    outcomes = await make_engine(store, box, receiver).run([DELIVERY_ID, "dlv_gone", "dlv_done"])
    assert set(outcomes) == {
        Result("dlv_gone", LeaseSkip.GONE),
        Result("dlv_done", LeaseSkip.DONE),
        Result(DELIVERY_ID, "succeeded", 1),
    }
    assert len(receiver.requests) == 1
    assert [r["delivery_id"] for r in store.records] == [DELIVERY_ID]


@pytest.mark.parametrize("ordered", [True, False])
async def test_a_fifo_head_is_not_sent_when_its_send_could_outlast_its_lease(
    box: SecretBox, ordered: bool
) -> None:
    """Leased at NOW_MS for 30 s, started 16 s later: a 15 s send would end after the lease,
    when another worker may have sent the next delivery of the line."""
    store = FakeStore([make_job(seal(box, (generate_secret(), None)), ordered=ordered)])
    receiver = Receiver()
    times = iter([NOW_MS, NOW_MS + 16_000])
    engine = make_engine(store, box, receiver, clock=lambda: next(times, NOW_MS + 16_000))

    outcomes = await engine.run([DELIVERY_ID])

    if ordered:
        assert outcomes == [Result(DELIVERY_ID, UNRECORDED, 1)]
        assert not receiver.requests and not store.records
    else:
        assert outcomes == [Result(DELIVERY_ID, "succeeded", 1)]


async def test_a_batch_sends_every_job_to_its_own_url(box: SecretBox) -> None:
    secret = generate_secret()
    sealed = seal(box, (secret, None))
    jobs = [
        make_job(sealed, delivery_id=f"dlv_{n}", url=f"https://r{n}.example.com/", event_id=f"m{n}")
        for n in range(5)
    ]
    store = FakeStore(jobs)
    receiver = Receiver()
    outcomes = await make_engine(store, box, receiver).run([j.delivery_id for j in jobs])
    assert sorted(o.delivery_id for o in outcomes) == [f"dlv_{n}" for n in range(5)]
    assert sorted(r.url for r in receiver.requests) == [
        f"https://r{n}.example.com/" for n in range(5)
    ]
    for sent in receiver.requests:
        verify(secret, sent)
        assert sent.url == f"https://r{sent.headers['webhook-id'][1:]}.example.com/"


async def test_an_async_handler_works_the_same(box: SecretBox) -> None:
    store = FakeStore([make_job(seal(box, (generate_secret(), None)))])

    async def handler(request: OutboundRequest) -> OutboundResponse:
        return OutboundResponse(204)

    assert await make_engine(store, box, handler).run([DELIVERY_ID]) == [
        Result(DELIVERY_ID, "succeeded", 1)
    ]


async def test_a_changed_secret_list_is_not_served_from_the_signer_cache(box: SecretBox) -> None:
    first, second = generate_secret(), generate_secret()
    receiver = Receiver()
    store = FakeStore([make_job(seal(box, (first, None)))])
    engine = make_engine(store, box, receiver)
    await engine.run([DELIVERY_ID])
    store.jobs = [make_job(seal(box, (second, None)))]
    await engine.run([DELIVERY_ID])
    verify(first, receiver.requests[0])
    verify(second, receiver.requests[1])
    with pytest.raises(WebhookVerificationError):
        verify(first, receiver.requests[1])


# -- through the real transport ----------------------------------------------------------------


async def _run_over_http(box: SecretBox, http: aioresponses, headers: dict[str, str]) -> int:
    http.post(URL_OK, status=503, headers=headers, response_class=CompatResponse)
    transport = AiohttpTransport(Guard(), total_timeout=5, connect_timeout=1, body_limit=64)
    store = FakeStore([make_job(seal(box, (generate_secret(), None)), attempt=1)])
    engine = DeliveryEngine(
        store.as_store(),
        transport,
        box,
        RetryPolicy((0.0, 10.0, 20.0), jitter=0.0),
        HEALTH,
        lease_ms=30_000,
        request_timeout=15.0,
        clock=lambda: NOW_MS,
    )
    try:
        await engine.run([DELIVERY_ID])
    finally:
        await transport.close()
    assert len(http.requests[("POST", URL(URL_OK))]) == 1
    delay: int = store.records[0]["delay_ms"]
    return delay


async def test_retry_after_over_http(box: SecretBox, http: aioresponses) -> None:
    assert await _run_over_http(box, http, {"Retry-After": "15"}) == 15_000


async def test_retry_after_header_name_is_case_insensitive(
    box: SecretBox, http: aioresponses
) -> None:
    assert await _run_over_http(box, http, {"retry-after": "15"}) == 15_000


# -- the headers an attempt records ----------------------------------------------------------

CREDENTIAL = "Bearer receiver-credential-0123456789"


def with_own_headers(box: SecretBox, secret: str, own: dict[str, str]) -> Job:
    return make_job(
        seal(box, (secret, None)),
        sealed_headers=encode_headers(seal_headers(box, ENDPOINT_ID, own)),
    )


async def recorded(box: SecretBox, job: Job, answer: OutboundResponse) -> tuple[Attempt, Receiver]:
    store = FakeStore([job])
    receiver = Receiver(answer)
    await make_engine(store, box, receiver).run([DELIVERY_ID])
    [record] = store.records
    attempt: Attempt = record["attempt"]
    return attempt, receiver


async def test_the_request_headers_are_recorded_as_sent_with_the_endpoints_values_redacted(
    box: SecretBox,
) -> None:
    secret = generate_secret()
    job = with_own_headers(box, secret, {"Authorization": CREDENTIAL, "X-Tenant": "acme"})
    attempt, receiver = await recorded(box, job, OutboundResponse(200))
    [sent] = receiver.requests
    assert sent.headers["Authorization"] == CREDENTIAL  # the receiver got it
    assert attempt.request_headers == {
        "user-agent": USER_AGENT,
        "authorization": REDACTED,
        "x-tenant": REDACTED,
        "webhook-id": EVENT_ID,
        "webhook-timestamp": str(NOW_MS // 1000),
        "webhook-signature": sent.headers["webhook-signature"],
        "content-type": "application/json",
    }
    # The record is enough to check what was signed.
    assert verify(secret, OutboundRequest(URL_OK, attempt.request_headers, BODY.encode()))


async def test_an_endpoints_own_user_agent_is_sent_and_redacted_ours_always_win(
    box: SecretBox,
) -> None:
    own = {"user-agent": "acme-relay", "WEBHOOK-ID": "forged"}
    attempt, receiver = await recorded(
        box, with_own_headers(box, generate_secret(), own), OutboundResponse(200)
    )
    [sent] = receiver.requests
    assert sent.headers["User-Agent"] == "acme-relay"
    assert len([n for n in sent.headers if n.lower() == "user-agent"]) == 1  # not ours too
    assert sent.headers["webhook-id"] == EVENT_ID
    assert attempt.request_headers["user-agent"] == REDACTED
    assert attempt.request_headers["webhook-id"] == EVENT_ID


async def test_answer_headers_are_recorded_with_their_credentials_redacted(
    box: SecretBox,
) -> None:
    job = with_own_headers(box, generate_secret(), {"X-Api-Key": "key-0123456789abcdef"})
    answer = CIMultiDict(
        [("Content-Type", "text/plain"), ("Set-Cookie", "session=abc; HttpOnly"),
         ("Set-Cookie", "csrf=def"), ("WWW-Authenticate", 'Basic realm="hooks"'),
         ("X-Echo-Api-Key", "key-0123456789abcdef"), ("X-Echo-Auth", CREDENTIAL)]
    )  # fmt: skip
    attempt, _ = await recorded(box, job, OutboundResponse(401, b"who?", answer))
    assert attempt.response_headers == {
        "content-type": "text/plain",
        "set-cookie": f"{REDACTED}, {REDACTED}",
        "www-authenticate": 'Basic realm="hooks"',
        # An echoing receiver repeats the endpoint's credentials: masked by redaction.py.
        "x-echo-api-key": MASK,
        "x-echo-auth": f"Bearer {MASK}",
    }


async def test_an_echoed_body_is_recorded_with_the_endpoints_credentials_masked(
    box: SecretBox,
) -> None:
    job = with_own_headers(box, generate_secret(), {"X-Api-Key": "key-0123456789abcdef"})
    echo = b'{"headers": {"X-Api-Key": "key-0123456789abcdef", "Authorization": "Bearer t0k3n"}}'
    attempt, _ = await recorded(box, job, OutboundResponse(200, echo))
    assert attempt.response_body == (
        f'{{"headers": {{"X-Api-Key": "{MASK}", "Authorization": "Bearer {MASK}"}}}}'
    )


async def test_an_answer_past_the_bounds_is_recorded_within_them_retry_after_still_counts(
    box: SecretBox,
) -> None:
    # More names than the record keeps, each shorter than Retry-After: it is left out.
    answer = {**{f"X-A{i:02}": "1" for i in range(100)}, "Retry-After": "15"}
    store = FakeStore([make_job(seal(box, (generate_secret(), None)))])
    await make_engine(store, box, Receiver(OutboundResponse(503, headers=answer))).run(
        [DELIVERY_ID]
    )
    [record] = store.records
    kept = record["attempt"].response_headers
    assert "retry-after" not in kept and kept[OMITTED].endswith("headers")
    assert sum(len(n) + len(v.encode()) for n, v in kept.items()) <= RECORDED_HEADER_BYTES
    assert record["delay_ms"] == 15_000  # read from the whole answer, not from the record
    # What rides to the log: the attempt's JSON, a bounded size whatever the receiver sent.
    assert len(record["attempt"].to_json()) < 2 * RECORDED_HEADER_BYTES


async def test_an_attempt_without_an_answer_records_what_was_sent(box: SecretBox) -> None:
    attempt, _ = await recorded(
        box,
        make_job(seal(box, (generate_secret(), None))),
        OutboundResponse(None, error="timeout"),
    )
    assert attempt.request_headers["webhook-id"] == EVENT_ID
    assert attempt.response_headers == {}


# -- receiver verdicts, endpoint headers, background sends ---------------------------------------


async def test_410_says_the_endpoint_is_gone_and_asks_no_retry(box: SecretBox) -> None:
    store = FakeStore([make_job(seal(box, (generate_secret(), None)), attempt=1)])
    outcomes = await make_engine(store, box, Receiver(OutboundResponse(410))).run([DELIVERY_ID])
    [record] = store.records
    assert record["outcome"] is AttemptOutcome.GONE
    assert record["delay_ms"] is None
    assert record["health"] == HEALTH
    assert outcomes == [Result(DELIVERY_ID, "disabled", 1)]


async def test_endpoint_headers_are_sent_but_never_override_ours(box: SecretBox) -> None:
    secret = generate_secret()
    own = {"X-Tenant": "acme", "webhook-id": "forged", "Content-Type": "text/plain"}
    job = make_job(
        seal(box, (secret, None)),
        sealed_headers=encode_headers(seal_headers(box, ENDPOINT_ID, own)),
    )
    receiver = Receiver()
    await make_engine(FakeStore([job]), box, receiver).run([DELIVERY_ID])
    [sent] = receiver.requests
    assert sent.headers["X-Tenant"] == "acme"
    assert sent.headers["webhook-id"] == EVENT_ID
    assert sent.headers["Content-Type"] == "application/json"
    verify(secret, sent)


class Held:
    """A MockTransport handler whose answers wait until the test releases them."""

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def __call__(self, request: OutboundRequest) -> OutboundResponse:
        await self.release.wait()
        return OutboundResponse(200)


async def test_start_returns_once_leased_and_drain_waits_for_the_sends(box: SecretBox) -> None:
    held = Held()
    store = FakeStore([make_job(seal(box, (generate_secret(), None)))])
    engine = make_engine(store, box, held)
    assert await engine.start([DELIVERY_ID]) == []
    assert len(store.leases) == 1
    assert store.records == []  # still sending
    assert await engine.drain(0.05) == 1
    held.release.set()
    assert await engine.drain(5) == 0
    assert [r["outcome"] for r in store.records] == [AttemptOutcome.OK]


async def test_start_waits_for_room_below_the_process_cap(box: SecretBox) -> None:
    held = Held()
    store = FakeStore([make_job(seal(box, (generate_secret(), None)))])
    engine = DeliveryEngine(
        store.as_store(),
        MockTransport(held),
        box,
        RetryPolicy((0.0,), jitter=0.0),
        HEALTH,
        lease_ms=30_000,
        request_timeout=15.0,
        max_in_flight=1,
        clock=lambda: NOW_MS,
    )
    await engine.start([DELIVERY_ID])
    second = asyncio.create_task(engine.start([DELIVERY_ID]))
    await asyncio.sleep(0.05)
    assert not second.done()  # the one slot is taken: no second lease yet
    assert len(store.leases) == 1
    held.release.set()
    await asyncio.wait_for(second, 5)
    assert len(store.leases) == 2
    await engine.drain(5)


async def test_a_freed_slot_is_passed_on_to_the_parked_delivery_at_once(box: SecretBox) -> None:
    sealed = seal(box, (generate_secret(), None))
    parked = make_job(sealed, delivery_id="dlv_parked")
    store = FakeStore([make_job(sealed)], parked=[parked])
    receiver = Receiver()
    engine = make_engine(store, box, receiver)
    await engine.start([DELIVERY_ID])
    await engine.drain(5)
    # The record leased the parked delivery in the same step, under the token it was given,
    # and this worker sent it: no second lease call.
    assert [lease[0] for lease in store.leases] == [[DELIVERY_ID]]
    assert [r["delivery_id"] for r in store.records] == [DELIVERY_ID, "dlv_parked"]
    assert store.records[0]["next_lease"].token == store.records[1]["token"]
    assert len(receiver.requests) == 2


async def test_run_leaves_parked_deliveries_to_the_scheduler(box: SecretBox) -> None:
    sealed = seal(box, (generate_secret(), None))
    store = FakeStore([make_job(sealed)], parked=[make_job(sealed, delivery_id="dlv_parked")])
    await make_engine(store, box, Receiver()).run([DELIVERY_ID])
    assert [r["next_lease"] for r in store.records] == [None]
    assert [r["delivery_id"] for r in store.records] == [DELIVERY_ID]


# -- a store that refuses the record -----------------------------------------------------------

MISCONF = "MISCONF Errors writing to the AOF file: No space left on device"


@dataclass
class RefusingStore(FakeStore):
    """Refuses the first ``refusals`` records with ``error``; ``on_refusal`` runs at each."""

    refusals: int = 0
    error: Exception = field(default_factory=lambda: redis.exceptions.ResponseError(MISCONF))
    on_refusal: Callable[[], None] = lambda: None
    tries: list[dict[str, Any]] = field(default_factory=list)

    async def record(self, **kwargs: Any) -> Recorded:
        self.tries.append(kwargs)
        if self.refusals > 0:
            self.refusals -= 1
            self.on_refusal()
            raise self.error
        return await super().record(**kwargs)


async def test_a_refused_record_is_tried_again_until_the_store_takes_it(box: SecretBox) -> None:
    """The receiver has the attempt: it is recorded once the store writes again, with the
    same lease token each time (so a try whose reply was lost cannot record it twice)."""
    store = RefusingStore([make_job(seal(box, (generate_secret(), None)))], refusals=3)
    receiver = Receiver()
    outcomes = await make_engine(store, box, receiver).run([DELIVERY_ID])
    assert outcomes == [Result(DELIVERY_ID, "succeeded", 1)]
    assert len(receiver.requests) == 1
    assert len(store.tries) == 4 and len(store.records) == 1
    assert {t["token"] for t in store.tries} == {store.leases[0][1]}


async def test_a_record_refused_until_the_lease_ends_is_left_to_the_lease(
    box: SecretBox, caplog: pytest.LogCaptureFixture
) -> None:
    """Past its lease another sender may hold the delivery: the engine stops trying, and the
    delivery's due entry (at the lease's end) sends it again."""
    now = [NOW_MS]

    def lease_runs_out() -> None:
        now[0] += 30_000

    job = make_job(seal(box, (generate_secret(), None)))
    store = RefusingStore([job], refusals=99, on_refusal=lease_runs_out)
    engine = make_engine(store, box, Receiver(), clock=lambda: now[0])
    outcomes = await engine.run([DELIVERY_ID])
    assert outcomes == [Result(DELIVERY_ID, UNRECORDED, 1)]
    assert len(store.tries) == 1 and store.records == []
    assert "not recorded" in caplog.text


async def test_an_error_that_waiting_does_not_cure_is_not_tried_again(box: SecretBox) -> None:
    bug = redis.exceptions.ResponseError("WRONGTYPE Operation against a key")
    store = RefusingStore([make_job(seal(box, (generate_secret(), None)))], refusals=1, error=bug)
    with pytest.raises(redis.exceptions.ResponseError):
        await make_engine(store, box, Receiver()).run([DELIVERY_ID])
    assert len(store.tries) == 1


# -- what the attempts count --------------------------------------------------------------------


def _added(batches: Sequence[AttemptCounts]) -> dict[str, dict[str, int]]:
    total: dict[str, dict[str, int]] = {}
    for batch in batches:
        for key, counts in batch.added.items():
            for name, amount in counts.items():
                total.setdefault(key, {}).setdefault(name, 0)
                total[key][name] += amount
    return total


async def test_attempts_are_counted_here_and_added_when_the_engine_drains(box: SecretBox) -> None:
    store = FakeStore([make_job(seal(box, (generate_secret(), None)))])
    receiver = Receiver(OutboundResponse(503, b"later"), OutboundResponse(200, b"ok"))
    engine = make_engine(store, box, receiver)
    await engine.run([DELIVERY_ID])
    await engine.run([DELIVERY_ID])
    assert store.counted == []  # within the interval: nothing written yet

    assert await engine.drain(1.0) == 0
    (batch,) = store.counted
    metrics = batch.added[keys.metrics(0)]
    assert metrics["attempts:5xx"] == metrics["attempts:2xx"] == 1
    assert metrics["latency:8"] == 1  # 250 ms since the delivery was made: (128, 256]
    assert metrics["latency_sum_ms"] == 250
    minute = keys.endpoint_minute(ENDPOINT_ID, NOW_MS // 60_000)
    assert batch.added[minute]["a"] == 2 and batch.added[minute]["s"] == 1
    assert batch.added[minute]["ds"] == 1  # the second attempt ended the delivery
    assert batch.expiry[minute] == keys.WINDOW_TTL["minute"]
    stats = batch.last[keys.endpoint_stats(ENDPOINT_ID)]
    assert stats["last_success"] == NOW_MS and stats["last_failure_code"] == 503


async def test_counts_are_added_an_interval_after_the_first_attempt(box: SecretBox) -> None:
    store = FakeStore([make_job(seal(box, (generate_secret(), None)))])
    engine = make_engine(store, box, Receiver(), counts_interval=0.05)
    await engine.run([DELIVERY_ID])
    await engine.run([DELIVERY_ID])
    await asyncio.sleep(0.2)
    assert len(store.counted) == 1  # one batch for both
    assert _added(store.counted)[keys.metrics(0)]["attempts:2xx"] == 2
    await engine.run([DELIVERY_ID])
    await asyncio.sleep(0.2)
    assert len(store.counted) == 2


@dataclass
class RefusingCounts(FakeStore):
    refusals: int = 1

    async def add_counts(self, batch: AttemptCounts) -> None:
        if self.refusals > 0:
            self.refusals -= 1
            raise redis.exceptions.ResponseError(MISCONF)
        await super().add_counts(batch)


async def test_counts_the_store_refuses_are_kept_for_the_next_add(box: SecretBox) -> None:
    store = RefusingCounts([make_job(seal(box, (generate_secret(), None)))])
    engine = make_engine(store, box, Receiver(), counts_interval=0.05)
    await engine.run([DELIVERY_ID])
    await engine.add_counts()  # refused: kept, and tried again an interval later
    assert store.counted == []
    await engine.run([DELIVERY_ID])
    await asyncio.sleep(0.2)
    assert _added(store.counted)[keys.metrics(0)]["attempts:2xx"] == 2
