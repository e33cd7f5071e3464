"""Bulk retry by history filter: a background job, its progress, and what it leaves alone."""

from __future__ import annotations

import pytest

from tests.integration.conftest import (
    Api,
    create_endpoint,
    delivery_statuses,
    finished_job,
    send_event,
    wait_for,
)
from tests.support.receiver import Receiver
from webhook_service.timeutil import iso, now_ms

pytestmark = pytest.mark.integration


async def test_bulk_retry_resends_the_failed_deliveries_a_filter_matches(
    api: Api, receiver: Receiver
) -> None:
    receiver.behaviours["down"] = lambda _name, _n: 500
    down = await create_endpoint(api, receiver, "down", ["bulk.thing"])
    fine = await create_endpoint(api, receiver, "fine", ["bulk.thing"])
    events = [await send_event(api, "bulk.thing", {"n": n}) for n in range(3)]

    async def settled() -> bool:
        statuses = [await delivery_statuses(api, e) for e in events]
        return all(s == {down["id"]: "failed", fine["id"]: "succeeded"} for s in statuses)

    await wait_for(settled)
    fine_before = len(receiver.for_endpoint("fine"))
    down_before = len(receiver.for_endpoint("down"))

    receiver.behaviours["down"] = lambda _name, _n: 200
    status, job, headers = await api.call(
        "POST", f"/v1/deliveries/retry?event_type=bulk.thing&since={_iso_ago(600)}"
    )
    assert status == 202, job
    assert job["kind"] == "retry" and headers["Location"] == f"/v1/jobs/{job['id']}"

    finished = await finished_job(api, job["id"])
    # Only the failed ones: the succeeded deliveries to "fine" are not sent again.
    assert (finished["matched"], finished["retried"]) == (3, 3)

    async def all_succeeded() -> bool:
        statuses = [await delivery_statuses(api, e) for e in events]
        return all(set(s.values()) == {"succeeded"} for s in statuses)

    await wait_for(all_succeeded)
    again = receiver.for_endpoint("down")[down_before:]
    assert sorted(r.webhook_id for r in again) == sorted(events)
    assert all(r.verified for r in again)
    assert len(receiver.for_endpoint("fine")) == fine_before


async def test_bulk_retry_never_touches_pending_deliveries(api: Api) -> None:
    status, body, _ = await api.call("POST", "/v1/deliveries/retry?status=pending")
    assert status == 422, body
    assert body["errors"][0]["pointer"] == "#/query/status"


async def test_an_unknown_job_is_404(api: Api) -> None:
    status, body, _ = await api.call("GET", "/v1/jobs/job_nothing")
    assert status == 404, body


def _iso_ago(seconds: int) -> str:
    return iso(now_ms() - seconds * 1000)
