"""GET /metrics: Prometheus text whose figures follow what the cluster does."""

from __future__ import annotations

import asyncio

from prometheus_client.parser import text_string_to_metric_families

from tests.integration.conftest import Api, create_endpoint, send_event, wait_for
from tests.support.receiver import Receiver
from tests.support.stack import ADMIN_KEY, Stack

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def _scrape(api: Api) -> Samples:
    async with api.session.get(
        api.base + "/metrics", headers={"Authorization": f"Bearer {ADMIN_KEY}"}
    ) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = await response.text()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _get(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def test_metrics_follow_deliveries(api: Api, receiver: Receiver) -> None:
    receiver.behaviours["mbad"] = lambda _n, _i: 500
    good = await create_endpoint(api, receiver, "mok", ["metrics.t"])
    bad = await create_endpoint(api, receiver, "mbad", ["metrics.t"])

    async def scheduler_seen() -> bool:
        return ("webhook_scheduler_lag_seconds", ()) in await _scrape(api)

    await wait_for(scheduler_seen)
    before = await _scrape(api)
    assert ("webhook_leases_in_flight", ()) in before
    for queue in ("fresh", "retry", "due"):
        assert ("webhook_queue_depth", (("queue", queue),)) in before

    events = [await send_event(api, "metrics.t", {"n": n}) for n in range(2)]
    status, _, _ = await api.call("POST", "/v1/events", json={"type": "no spaces", "data": {}})
    assert status == 422

    async def settled() -> bool:
        for event_id in events:
            _, event, _ = await api.call("GET", f"/v1/events/{event_id}")
            if {d["status"] for d in event["deliveries"]} != {"succeeded", "failed"}:
                return False
        return True

    await wait_for(settled)
    attempts_per_failure = 4  # the stack's schedule: 0, 0.3, 0.3, 0.3
    after = await _scrape(api)

    def grew(name: str, **labels: str) -> float:
        return _get(after, name, **labels) - _get(before, name, **labels)

    async def counted() -> bool:
        """The workers add their attempts' counts within WEBHOOK_COUNTS_INTERVAL (1 s)."""
        nonlocal after
        after = await _scrape(api)
        return grew("webhook_attempt_duration_seconds_count") == 2 + 2 * attempts_per_failure

    await wait_for(counted, timeout=5)
    assert grew("webhook_events_accepted_total") == 2
    assert grew("webhook_events_rejected_total", reason="validation-failed") == 1
    assert grew("webhook_deliveries_total", outcome="succeeded") == 2
    assert grew("webhook_deliveries_total", outcome="failed") == 2
    assert grew("webhook_attempts_total", **{"class": "2xx"}) == 2
    assert grew("webhook_attempts_total", **{"class": "5xx"}) == 2 * attempts_per_failure
    assert grew("webhook_attempt_duration_seconds_count") == 2 + 2 * attempts_per_failure
    assert grew("webhook_attempt_duration_seconds_bucket", le="+Inf") == 10
    assert grew("webhook_attempt_duration_seconds_sum") >= 0
    assert grew("webhook_delivery_latency_seconds_count") == 2
    # Cumulative buckets never shrink as they widen.
    buckets = sorted(
        (float(dict(labels)["le"]), value)
        for (name, labels), value in after.items()
        if name == "webhook_attempt_duration_seconds_bucket"
    )
    assert [v for _, v in buckets] == sorted(v for _, v in buckets)

    status, _, _ = await api.call("PATCH", f"/v1/endpoints/{bad['id']}", json={"disabled": True})
    assert status == 200
    assert grew_now(await _scrape(api), before, "webhook_endpoints_disabled") == 1
    assert good["id"] != bad["id"]

    # A receiver that holds the request: its delivery is leased while it waits.
    receiver.hang.add("mhang")
    await create_endpoint(api, receiver, "mhang", ["metrics.hang"])
    await send_event(api, "metrics.hang", {})
    await wait_for(lambda: _arrived(receiver, "mhang"))
    assert _get(await _scrape(api), "webhook_leases_in_flight") == 1


async def _arrived(receiver: Receiver, name: str) -> bool:
    return bool(receiver.for_endpoint(name))


def grew_now(now: Samples, before: Samples, name: str) -> float:
    return _get(now, name) - _get(before, name)


async def test_metrics_need_the_admin_scope(api: Api) -> None:
    status, _, headers = await api.call("GET", "/metrics", key=None)
    assert status == 401 and headers["WWW-Authenticate"].startswith("Bearer")
    status, reader, _ = await api.call(
        "POST", "/v1/api-keys", json={"name": "dash", "scopes": ["deliveries:read"]}
    )
    assert status == 201
    status, problem, _ = await api.call("GET", "/metrics", key=reader["key"])
    assert status == 403, problem


async def test_the_log_backlog_and_its_lag(stack: Stack, api: Api) -> None:
    """With no shipper the outbox grows and ages; with one it empties, and the lag is 0."""
    stack.terminate("scheduler")
    try:
        before = _get(await _scrape(api), "webhook_log_backlog")
        for n in range(5):
            await send_event(api, "metrics.unsubscribed", {"n": n})
        await asyncio.sleep(1.1)
        waiting = await _scrape(api)
        assert _get(waiting, "webhook_log_backlog") >= before + 5
        assert _get(waiting, "webhook_log_lag_seconds") >= 1.0
    finally:
        stack.start("scheduler")

    async def shipped() -> bool:
        now = await _scrape(api)
        return _get(now, "webhook_log_backlog") == _get(now, "webhook_log_lag_seconds") == 0

    await wait_for(shipped)
