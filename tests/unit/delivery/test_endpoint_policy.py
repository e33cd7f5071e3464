"""An endpoint's own retry policy: its bounds, and the engine taking it from the lease."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from aioresponses import aioresponses
from pydantic import ValidationError

from signer import generate_secret
from tests.unit.admin.test_admin_applications import ENDPOINT, answer, requests, run
from tests.unit.delivery.test_delivery_engine import (
    DELIVERY_ID,
    FakeStore,
    Receiver,
    make_engine,
    make_job,
    seal,
)
from webhook_service.api.models import EndpointIn, EndpointPatch, endpoint_json
from webhook_service.crypto import SecretBox, generate_master_key
from webhook_service.delivery.backoff import RetryPolicy
from webhook_service.delivery.policy import MAX_SCHEDULE_SECONDS
from webhook_service.delivery.transport import OutboundResponse
from webhook_service.store.deliveries import LeaseResult
from webhook_service.store.endpoints import EndpointRecord, decode_schedule, encode_schedule

URL = "https://receiver.example.com/hook"


@pytest.fixture
def box() -> SecretBox:
    return SecretBox(generate_master_key())


def refusal(body: dict[str, Any], model: type[EndpointIn | EndpointPatch] = EndpointIn) -> str:
    """The one field a body is refused for (each error's first location part)."""
    with pytest.raises(ValidationError) as caught:
        model.model_validate({"url": URL, **body})
    [field] = {str(error["loc"][0]) for error in caught.value.errors()}
    return field


# -- validation --------------------------------------------------------------------------------


def test_a_schedule_of_twenty_attempts_is_taken_and_one_more_refused() -> None:
    taken = EndpointIn.model_validate({"url": URL, "retry_schedule": [0] + [60] * 19})
    assert taken.retry_schedule is not None and len(taken.retry_schedule) == 20
    assert refusal({"retry_schedule": [0] + [60] * 20}) == "retry_schedule"


def test_a_schedule_of_seven_days_is_taken_and_a_second_more_refused() -> None:
    week = [0, MAX_SCHEDULE_SECONDS / 2, MAX_SCHEDULE_SECONDS / 2]
    assert EndpointIn.model_validate({"url": URL, "retry_schedule": week}).retry_schedule == week
    assert refusal({"retry_schedule": [*week, 1]}) == "retry_schedule"


@pytest.mark.parametrize(
    "schedule",
    [[], [1, 1], [0, -1], [0, "1"], "0,1,1", [0, True], [0, 1e308, 1e308], [0, 604_801]],
    ids=repr,
)
def test_a_malformed_schedule_is_refused(schedule: Any) -> None:
    assert refusal({"retry_schedule": schedule}) == "retry_schedule"


@pytest.mark.parametrize("seconds", [1, 1.5, 60])
def test_a_timeout_from_one_to_sixty_seconds_is_taken(seconds: float) -> None:
    assert EndpointIn.model_validate({"url": URL, "timeout_seconds": seconds}).timeout_seconds == (
        seconds
    )


@pytest.mark.parametrize("seconds", [0, 0.99, 60.01, 3600, "5"])
def test_a_timeout_out_of_bounds_is_refused(seconds: Any) -> None:
    assert refusal({"timeout_seconds": seconds}) == "timeout_seconds"
    assert refusal({"timeout_seconds": seconds}, EndpointPatch) == "timeout_seconds"


def test_a_patch_of_null_clears_and_one_that_leaves_them_out_keeps() -> None:
    cleared = EndpointPatch.model_validate({"retry_schedule": None, "timeout_seconds": None})
    assert {"retry_schedule", "timeout_seconds"} <= cleared.model_fields_set
    assert not {"retry_schedule", "timeout_seconds"} & EndpointPatch().model_fields_set


def test_the_endpoint_shows_its_policy_and_null_for_the_global_one() -> None:
    record = EndpointRecord("ep_1", URL, "", None, False, 0, 0)
    assert endpoint_json(record, {})["retry_schedule"] is None
    assert endpoint_json(record, {})["timeout_seconds"] is None
    record.retry_schedule, record.timeout_seconds = (0.0, 1.0, 1.0), 2.5
    shown = endpoint_json(record, {})
    assert (shown["retry_schedule"], shown["timeout_seconds"]) == ([0, 1, 1], 2.5)


def test_the_stored_schedule_reads_back() -> None:
    assert decode_schedule(encode_schedule((0.0, 1.5, 30.0))) == (0.0, 1.5, 30.0)
    assert decode_schedule(encode_schedule(None)) is None


# -- the lease and the engine ------------------------------------------------------------------


def test_the_lease_row_carries_the_endpoint_policy() -> None:
    row = [
        "dlv_1",
        "go",
        "0",
        "msg_1",
        "ep_1",
        "{}",
        URL,
        "[]",
        "",
        "[0,1,1]",
        "2.5",
        "1",
        "tp",
        "1",
    ]
    [job] = LeaseResult.parse([row]).jobs
    assert (job.retry_schedule, job.timeout_seconds) == ((0.0, 1.0, 1.0), 2.5)
    assert (job.ordered, job.traceparent, job.send_traceparent) == (True, "tp", True)
    # The lease covers the global timeout (its base) and the endpoint's own on top.
    assert job.lease_ms(30_000) == 32_500
    [default] = LeaseResult.parse([[*row[:9], "", "", "", "", ""]]).jobs
    assert (default.retry_schedule, default.timeout_seconds) == (None, None)
    assert (default.ordered, default.traceparent, default.send_traceparent) == (False, None, False)
    assert default.lease_ms(30_000) == 30_000


def test_an_endpoint_schedule_replaces_the_global_one() -> None:
    base = RetryPolicy((0.0, 10.0, 20.0), jitter=0.0)
    assert base.for_schedule(None) is base
    own = base.for_schedule((0.0, 1.0))
    assert (own.delay_after(1), own.delay_after(2)) == (1.0, None)
    assert (own.jitter, own.throttle_floor) == (base.jitter, base.throttle_floor)


async def test_the_engine_takes_delay_budget_and_timeout_from_the_job(box: SecretBox) -> None:
    sealed = seal(box, (generate_secret(), None))
    job = make_job(sealed, attempt=2, retry_schedule=(0.0, 1.0, 3.0), timeout_seconds=4.0)
    store = FakeStore([job])
    receiver = Receiver(OutboundResponse(500, b"no"))
    await make_engine(store, box, receiver).run([DELIVERY_ID])

    [sent] = receiver.requests
    assert sent.timeout == 4.0
    [record] = store.records
    # After attempt 2 comes the schedule's third delay, 3 s (the global one says 20 s).
    assert (record["delay_ms"], record["budget"]) == (3000, 3)


async def test_without_a_policy_the_global_one_decides(box: SecretBox) -> None:
    store = FakeStore([make_job(seal(box, (generate_secret(), None)), attempt=2)])
    receiver = Receiver(OutboundResponse(500, b"no"))
    await make_engine(store, box, receiver).run([DELIVERY_ID])

    assert receiver.requests[0].timeout is None  # the transport's own
    [record] = store.records
    assert (record["delay_ms"], record["budget"]) == (20_000, 0)  # 0: the delivery's own


# -- the command line --------------------------------------------------------------------------


@pytest.fixture
def http() -> Iterator[aioresponses]:
    with aioresponses() as mocked:
        yield mocked


def test_the_cli_sends_the_policy_and_shows_it(
    http: aioresponses, capsys: pytest.CaptureFixture[str]
) -> None:
    answer(http, "POST", {**ENDPOINT, "retry_schedule": [0, 1, 1], "timeout_seconds": 5}, 201)
    args = ("https://example.com/h", "--retry-schedule", "0,1,1", "--timeout", "5")
    assert run("endpoints", "create", *args) == 0
    shown = capsys.readouterr().out
    assert "0, 1, 1 s (3 attempts)" in shown and "5 s" in shown
    [(_, path, body)] = requests(http)
    assert path == "/v1/endpoints"
    assert (body["retry_schedule"], body["timeout_seconds"]) == ([0, 1, 1], 5)


def test_the_cli_update_sends_only_what_is_given_and_clears_with_no(
    http: aioresponses, capsys: pytest.CaptureFixture[str]
) -> None:
    answer(http, "PATCH", ENDPOINT)
    assert run("endpoints", "update", "ep_1", "--retry-schedule", "0,60") == 0
    assert run("endpoints", "update", "ep_1", "--no-retry-schedule", "--no-timeout") == 0
    assert "global setting" in capsys.readouterr().out
    [(method, path, first), (_, _, second)] = requests(http)
    assert (method, path) == ("PATCH", "/v1/endpoints/ep_1")
    assert first == {"retry_schedule": [0, 60]}
    assert second == {"retry_schedule": None, "timeout_seconds": None}


def test_the_cli_refuses_an_update_of_nothing_and_a_schedule_that_is_no_list(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run("endpoints", "update", "ep_1") == 2
    assert "--retry-schedule" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run("endpoints", "create", "https://example.com/h", "--retry-schedule", "0,soon")
