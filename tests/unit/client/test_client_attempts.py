"""The producer client's decisions, shared by the sync and async clients: no I/O here."""

from __future__ import annotations

import random

import orjson
import pytest
from multidict import CIMultiDict

from webhook_service.client import (
    APIError,
    AuthenticationError,
    Backoff,
    ClientError,
    IdempotencyKeyReused,
    InvalidEvent,
    ProblemDetails,
    ServerError,
    TransportError,
)
from webhook_service.client.attempts import (
    Accepted,
    Attempts,
    Wait,
    event_body,
    events_url,
    path_segment,
)

PROBLEMS = "https://webhook-service.dev/problems/"
URL = "http://api.internal/v1/applications/default/events"
BODY = event_body("invoice.paid", {"n": 1}, None, None)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def attempts(
    backoff: Backoff | None = None, key: str | None = None, clock: Clock | None = None
) -> Attempts:
    return Attempts(
        URL,
        "k",
        BODY,
        key,
        backoff or Backoff(),
        clock=clock or Clock(),
        rng=random.Random(7),
    )


def problem(status: int, kind: str, **extra: object) -> bytes:
    return orjson.dumps(
        {
            "type": PROBLEMS + kind,
            "title": "t",
            "status": status,
            "detail": "d",
            "instance": "/v1/applications/default/events",
            **extra,
        }
    )


NO_HEADERS: CIMultiDict[str] = CIMultiDict()


def test_the_request_is_the_event_with_a_generated_key_when_none_is_given() -> None:
    first, second = attempts(), attempts()
    assert orjson.loads(first.request.body) == {"type": "invoice.paid", "data": {"n": 1}}
    assert first.request.headers["Authorization"] == "Bearer k"
    assert first.request.headers["Content-Type"] == "application/json"
    generated = first.request.headers["Idempotency-Key"]
    assert generated == first.idempotency_key and 1 <= len(generated) <= 255
    assert second.idempotency_key != generated
    assert attempts(key="order-7").request.headers["Idempotency-Key"] == "order-7"


def test_a_2xx_answer_is_the_event_id() -> None:
    step = attempts().answered(202, NO_HEADERS, b'{"id": "msg_1", "deliveries": 2}')
    assert step == Accepted("msg_1")


@pytest.mark.parametrize(
    ("status", "kind", "error"),
    [
        (401, "unauthorized", AuthenticationError),
        (403, "forbidden", AuthenticationError),
        (400, "malformed-request", InvalidEvent),
        (413, "payload-too-large", InvalidEvent),
        (415, "unsupported-media-type", InvalidEvent),
        (422, "validation-failed", InvalidEvent),
        (422, "idempotency-key-reused", IdempotencyKeyReused),
        (404, "not-found", InvalidEvent),  # no such application
        (405, "method-not-allowed", ClientError),
        (500, "internal-error", ServerError),
    ],
)
def test_answers_that_a_retry_cannot_change_raise_at_once(
    status: int, kind: str, error: type[APIError]
) -> None:
    sent = attempts()
    with pytest.raises(error) as raised:
        sent.answered(status, NO_HEADERS, problem(status, kind))
    assert type(raised.value) is error
    assert raised.value.problem.status == status
    assert raised.value.problem.kind == kind


def test_validation_errors_carry_their_pointers() -> None:
    body = problem(422, "validation-failed", errors=[{"pointer": "/type", "detail": "bad"}])
    with pytest.raises(InvalidEvent) as raised:
        attempts().answered(422, NO_HEADERS, body)
    assert list(raised.value.problem.errors) == [{"pointer": "/type", "detail": "bad"}]
    assert str(raised.value) == "422 t: d"


def test_a_non_problem_answer_still_becomes_a_problem() -> None:
    parsed = ProblemDetails.parse(502, b"<html>bad gateway</html>")
    assert (parsed.status, parsed.kind, parsed.detail) == (
        502,
        "about:blank",
        "<html>bad gateway</html>",
    )
    assert ProblemDetails.parse(400, b"[1, 2]").detail == "[1, 2]"


@pytest.mark.parametrize("status", [429, 502, 503, 504])
def test_overload_answers_are_retried(status: int) -> None:
    assert isinstance(attempts().answered(status, NO_HEADERS, b""), Wait)


def test_an_in_flight_idempotency_key_is_retried_but_another_409_is_not() -> None:
    assert isinstance(
        attempts().answered(409, NO_HEADERS, problem(409, "idempotency-in-flight")), Wait
    )
    with pytest.raises(ClientError):
        attempts().answered(409, NO_HEADERS, problem(409, "conflict"))


def test_waits_grow_exponentially_with_jitter_and_stay_under_the_cap() -> None:
    backoff = Backoff(max_attempts=50, base=0.5, cap=8.0, deadline=10_000)
    sent = attempts(backoff)
    waits = [sent.failed(ConnectionRefusedError()) for _ in range(8)]
    seconds = [w.seconds for w in waits if isinstance(w, Wait)]
    ceilings = [min(8.0, 0.5 * 2**n) for n in range(8)]
    assert all(c / 2 <= s <= c for s, c in zip(seconds, ceilings, strict=True)), seconds
    assert seconds[-1] > seconds[0]


def test_by_default_a_minute_of_refused_connections_is_waited_out() -> None:
    # An API process restarting refuses connections for seconds; the default policy must not
    # give up before the deadline has mostly passed, however the jitter falls.
    for seed in range(20):
        clock = Clock()
        sent = Attempts(URL, "k", BODY, None, Backoff(), clock=clock, rng=random.Random(seed))
        with pytest.raises(TransportError):
            while True:
                step = sent.failed(ConnectionRefusedError())
                assert isinstance(step, Wait)
                clock.now += step.seconds
        assert clock.now >= 60, seed


def test_jitter_spreads_clients_apart() -> None:
    delays = {Backoff().delay(3, None, random.Random(seed)) for seed in range(20)}
    assert len(delays) == 20


def test_retry_after_is_a_floor() -> None:
    headers = CIMultiDict({"retry-after": "5"})
    step = attempts().answered(503, headers, problem(503, "store-unavailable"))
    assert isinstance(step, Wait) and 5.0 <= step.seconds <= 5.5


def test_the_last_try_raises_the_last_failure() -> None:
    sent = attempts(Backoff(max_attempts=3))
    assert isinstance(sent.answered(503, NO_HEADERS, b""), Wait)
    assert isinstance(sent.failed(TimeoutError()), Wait)
    with pytest.raises(TransportError) as raised:
        sent.failed(ConnectionResetError("reset"))
    assert isinstance(raised.value.__cause__, ConnectionResetError)

    other = attempts(Backoff(max_attempts=2))
    other.failed(TimeoutError())
    with pytest.raises(ServerError) as unavailable:
        other.answered(503, NO_HEADERS, problem(503, "store-unavailable"))
    assert unavailable.value.problem.kind == "store-unavailable"


def test_a_wait_that_would_end_past_the_deadline_is_not_begun() -> None:
    clock = Clock()
    sent = attempts(Backoff(deadline=10.0), clock=clock)
    assert isinstance(sent.answered(503, CIMultiDict({"Retry-After": "4"}), b""), Wait)
    clock.now = 7.0
    with pytest.raises(ServerError):
        sent.answered(503, CIMultiDict({"Retry-After": "4"}), b"")


def test_the_service_url_must_be_http() -> None:
    assert events_url("https://api.internal/", "default") == (
        "https://api.internal/v1/applications/default/events"
    )
    with pytest.raises(ValueError, match="http or https"):
        events_url("file:///etc/passwd", "default")
    with pytest.raises(ValueError, match="'default'"):
        events_url("https://api.internal", "")
    with pytest.raises(ValueError):
        Backoff(max_attempts=0)


@pytest.mark.parametrize(
    ("app", "segment"),
    [
        ("app_01JABCDEFGHJKMNPQRSTVWXYZ0", "app_01JABCDEFGHJKMNPQRSTVWXYZ0"),
        ("customer-42.eu_west", "customer-42.eu_west"),
        ("a/b?c#d", "a%2Fb%3Fc%23d"),
        ("50%", "50%25"),
        ("é", "%C3%A9"),
        # Dots alone are resolved by URL libraries: ../events would be POST /v1/events.
        ("..", "%2E%2E"),
        (".", "%2E"),
        ("x..", "x.."),
    ],
)
def test_the_application_is_one_path_segment_whatever_it_holds(app: str, segment: str) -> None:
    url = events_url("http://api.internal", app)
    assert url == f"http://api.internal/v1/applications/{segment}/events"
    assert path_segment(app) == segment


def test_the_body_carries_channels_and_the_application_to_create_only_when_given() -> None:
    assert orjson.loads(event_body("a.b", {"n": 1}, None, None)) == {
        "type": "a.b",
        "data": {"n": 1},
    }
    assert orjson.loads(event_body("a.b", {}, ("eu", "vip"), "Acme Ltd")) == {
        "type": "a.b",
        "data": {},
        "channels": ["eu", "vip"],
        "application": {"name": "Acme Ltd"},
    }
    # No channels at all is the event without channels, not a list the API would refuse.
    assert "channels" not in orjson.loads(event_body("a.b", {}, [], None))


def test_mistakes_a_type_checker_would_miss_are_refused_before_sending() -> None:
    with pytest.raises(TypeError, match="list of strings"):
        event_body("a.b", {}, "eu", None)
    # The order before applications: send(type, data) puts the data where the type goes.
    with pytest.raises(TypeError, match="application comes first"):
        event_body({"n": 1}, {}, None, None)  # type: ignore[arg-type]
