"""GET /v1/endpoints/{id}/stats: windows, rates, latency and last outcomes."""

from __future__ import annotations

from tests.integration.conftest import Api, create_endpoint, send_event, wait_for
from tests.support.receiver import Receiver

ATTEMPTS = 4  # a delivery's budget under the stack's retry schedule: 0, 0.3, 0.3, 0.3


async def _finished(api: Api, endpoint_id: str, count: int, attempts: int) -> bool:
    """``count`` deliveries final, and their ``attempts`` counted in the endpoint's stats:
    the workers add their counts within WEBHOOK_COUNTS_INTERVAL (1 s) of the attempts."""
    _, page, _ = await api.call("GET", f"/v1/deliveries?endpoint_id={endpoint_id}")
    statuses = [d["status"] for d in page["data"]]
    if len(statuses) != count or "pending" in statuses:
        return False
    _, stats, _ = await api.call("GET", f"/v1/endpoints/{endpoint_id}/stats")
    return bool(stats["last_hour"]["attempts"] == attempts)


async def test_stats_count_attempts_deliveries_and_latency(api: Api, receiver: Receiver) -> None:
    # The first request fails, every later one succeeds.
    receiver.behaviours["st"] = lambda _n, seen: 500 if seen == 1 else 200
    endpoint = await create_endpoint(api, receiver, "st", ["stats.one"])
    status, fresh, _ = await api.call("GET", f"/v1/endpoints/{endpoint['id']}/stats")
    assert status == 200
    assert fresh["last_hour"]["deliveries"] == 0 and fresh["last_hour"]["success_rate"] is None
    assert fresh["last_hour"]["latency_ms"] == {"p50": None, "p95": None}
    assert (fresh["last_success_at"], fresh["last_failure"], fresh["backlog"]) == (None, None, 0)

    for n in range(3):
        await send_event(api, "stats.one", {"n": n})
    await wait_for(lambda: _finished(api, endpoint["id"], 3, 4))

    status, stats, _ = await api.call("GET", f"/v1/endpoints/{endpoint['id']}/stats")
    assert status == 200, stats
    for window in (stats["last_hour"], stats["last_day"]):
        assert (window["deliveries"], window["succeeded"], window["failed"]) == (3, 3, 0)
        assert window["success_rate"] == 1.0
        assert (window["attempts"], window["attempts_succeeded"]) == (4, 3)
        assert window["attempt_success_rate"] == 0.75
        p50, p95 = window["latency_ms"]["p50"], window["latency_ms"]["p95"]
        assert p50 is not None and p95 is not None and 0 <= p50 <= p95
    assert len(stats["per_minute"]) == 60
    assert sum(m["attempts"] for m in stats["per_minute"]) == 4
    assert stats["per_minute"][0]["start"] < stats["per_minute"][-1]["start"]
    assert stats["last_success_at"] is not None
    assert stats["last_failure"]["status_code"] == 500
    assert stats["last_failure"]["error"] is None
    assert stats["last_failure"]["at"] <= stats["last_success_at"]
    assert stats["backlog"] == 0


async def test_failed_deliveries_count_against_the_rate(api: Api, receiver: Receiver) -> None:
    receiver.behaviours["stbad"] = lambda _n, _i: 502
    endpoint = await create_endpoint(api, receiver, "stbad", ["stats.bad"])
    await send_event(api, "stats.bad", {})
    await wait_for(lambda: _finished(api, endpoint["id"], 1, ATTEMPTS))
    _, stats, _ = await api.call("GET", f"/v1/endpoints/{endpoint['id']}/stats")
    hour = stats["last_hour"]
    assert (hour["deliveries"], hour["failed"], hour["success_rate"]) == (1, 1, 0.0)
    assert hour["attempts"] == ATTEMPTS and hour["attempt_success_rate"] == 0.0
    assert stats["last_success_at"] is None and stats["last_failure"]["status_code"] == 502


async def test_stats_of_an_unknown_endpoint_is_404(api: Api) -> None:
    status, problem, _ = await api.call("GET", "/v1/endpoints/ep_nothing/stats")
    assert status == 404 and problem["status"] == 404
