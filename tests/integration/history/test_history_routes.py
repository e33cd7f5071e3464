"""The history routes on the real stack (Valkey, a Celery worker, the scheduler with its
shipper, the log on each backend): reads by id answer at once after the POST, lists once the
shipper has shipped, an attempt shows the headers sent and answered, and an API whose log
cannot be read answers its history lists 503 ``log-unavailable`` while what Redis holds is
still read by id and ingest goes on."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import SecretStr

from tests.integration.conftest import (
    Api,
    create_endpoint,
    send_event,
    serve_api,
    settings_for,
    wait_for,
)
from tests.support.log_away import unreachable_log_url
from tests.support.logged import wait_logged
from tests.support.receiver import Receiver
from tests.support.stack import Stack

pytestmark = [pytest.mark.integration, pytest.mark.both_logs]

PROBLEMS = "https://webhook-service.dev/problems/"


async def _ok(api: Api, path: str) -> Any:
    status, body, _ = await api.call("GET", path)
    assert status == 200, (path, body)
    return body


async def test_read_by_id_at_once_listed_once_shipped_with_the_attempt_headers(
    api: Api, receiver: Receiver, stack: Stack
) -> None:
    receiver.answer_headers["routes"] = [("X-Receipt", "r-1")]
    endpoint = await create_endpoint(api, receiver, "routes", ["routes.read"])
    event_id = await send_event(api, "routes.read", {"n": 1})
    # At once, before any shipper: the event and its delivery are Redis's.
    event = await _ok(api, f"/v1/events/{event_id}")
    assert event["data"] == {"n": 1} and len(event["deliveries"]) == 1
    delivery_id = event["deliveries"][0]["id"]
    delivery = await _ok(api, f"/v1/deliveries/{delivery_id}")
    assert delivery["event_id"] == event_id and delivery["endpoint_id"] == endpoint["id"]

    async def succeeded() -> bool:
        found = await _ok(api, f"/v1/deliveries/{delivery_id}")
        return bool(found["status"] == "succeeded")

    await wait_for(succeeded)
    await wait_logged(stack.valkey.url)
    listed = await _ok(api, f"/v1/deliveries?event_id={event_id}")
    assert [d["id"] for d in listed["data"]] == [delivery_id]
    assert listed["data"][0]["status"] == "succeeded"
    events = await _ok(api, "/v1/events?type=routes.read")
    assert [(e["id"], e["deliveries"]) for e in events["data"]] == [(event_id, 1)]

    (attempt,) = (await _ok(api, f"/v1/deliveries/{delivery_id}"))["attempt_log"]
    assert attempt["status_code"] == 200
    sent, answered = attempt["request_headers"], attempt["response_headers"]
    assert sent["webhook-id"] == event_id and sent["webhook-signature"].startswith("v1,")
    assert answered["x-receipt"] == "r-1"


async def test_an_api_whose_log_cannot_be_read_answers_503_and_still_reads_redis(
    api: Api, receiver: Receiver, stack: Stack
) -> None:
    paused = await create_endpoint(api, receiver, "routes-paused", ["routes.down"])
    status, _, _ = await api.call("POST", f"/v1/endpoints/{paused['id']}/disable")
    assert status == 200
    settings = settings_for(stack).model_copy(update={"log_url": SecretStr(unreachable_log_url())})
    async with serve_api(settings) as (_, away):
        # Ingest never needs the log; the event and its delivery (disabled: no attempt, so
        # no attempt log to read) are Redis's.
        status, accepted, _ = await away.call(
            "POST", "/v1/events", json={"type": "routes.down", "data": {}}
        )
        assert status == 202, accepted
        event = await _ok(away, f"/v1/events/{accepted['id']}")
        (delivery,) = event["deliveries"]
        assert delivery["status"] == "disabled"
        detail = await _ok(away, f"/v1/deliveries/{delivery['id']}")
        assert detail["attempt_log"] == []

        for path in (
            "/v1/deliveries",
            f"/v1/deliveries?endpoint_id={paused['id']}&status=failed",
            "/v1/events?type=routes.down",
            # Neither in Redis nor readable in the log: which it is cannot be told.
            "/v1/deliveries/dlv_" + "0" * 52,
            "/v1/events/msg_" + "0" * 26,
        ):
            status, problem, headers = await away.call("GET", path)
            assert status == 503, (path, problem)
            assert headers["Content-Type"].startswith("application/problem+json")
            assert problem["type"] == PROBLEMS + "log-unavailable" and headers["Retry-After"]
            assert problem["instance"] == path.split("?")[0]

        # A bulk retry is taken and waits for the log; it does not fail.
        retry = f"/v1/deliveries/retry?status=disabled&endpoint_id={paused['id']}"
        status, job, _ = await away.call("POST", retry)
        assert status == 202, job
        await asyncio.sleep(0.5)
        _, job, _ = await away.call("GET", f"/v1/jobs/{job['id']}")
        assert (job["state"], job["matched"]) == ("running", 0)
