"""An application's health and volume, summed from its endpoints' stats (shared by the
dashboard and the CLI): the sums, the words, and the gathering against aioresponses standing
in for the API: a bounded number of requests in flight, and what a key may not see (403) or
what was deleted meanwhile (404)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest
from aioresponses import CallbackResult, aioresponses

from tests.support.mock_http import CompatResponse
from webhook_service.admin.api import AdminApi
from webhook_service.admin.application_health import (
    NO_ENDPOINTS,
    UNSEEN,
    Volume,
    endpoint_cells,
    summaries,
    summarize,
    summary,
    volume_cells,
    word,
)
from webhook_service.client.errors import APIError

BASE = "http://api.test:8000"
EARLY, LATE = "2026-01-31T12:00:00.000Z", "2026-01-31T12:05:00.000Z"


def _window(succeeded: int, failed: int) -> dict[str, Any]:
    return {"succeeded": succeeded, "failed": failed, "attempt_success_rate": None}


def _stats(
    hour: tuple[int, int] = (0, 0),
    day: tuple[int, int] = (0, 0),
    backlog: int = 0,
    success: str | None = None,
    failure: str | None = None,
) -> dict[str, Any]:
    return {
        "last_hour": _window(*hour),
        "last_day": _window(*day),
        "backlog": backlog,
        "per_minute": [],
        "last_success_at": success,
        "last_failure": None if failure is None else {"at": failure},
    }


def _endpoint(disabled: bool = False, endpoint_id: str = "ep_1") -> dict[str, Any]:
    return {"id": endpoint_id, "disabled": disabled}


def test_an_application_sums_its_endpoints_and_is_as_healthy_as_its_worst() -> None:
    summed = summarize(
        [_endpoint(), _endpoint(), _endpoint(disabled=True)],
        [
            _stats((3, 0), (10, 0), backlog=2, success=LATE),
            _stats((1, 2), (1, 5), backlog=1, success=EARLY, failure=LATE),
            _stats(),
        ],
    )
    assert (summed.endpoints, summed.disabled, summed.failing) == (3, 1, 1)
    assert summed.health == "failing"
    assert summed.last_hour == Volume(4, 2) and summed.last_day == Volume(11, 5)
    assert summed.last_hour.deliveries == 6 and summed.last_hour.success_rate == 4 / 6
    assert summed.backlog == 3
    assert word(summed) == "failing"
    assert endpoint_cells(summed) == [3, 1, 1]
    assert volume_cells(summed) == [6, "66.7%", 16, "68.8%", 3]
    assert summed.as_json() == {
        "status": "failing", "endpoints": 3, "disabled": 1, "failing": 1,
        "last_hour": {"deliveries": 6, "succeeded": 4, "failed": 2, "success_rate": 4 / 6},
        "last_day": {"deliveries": 16, "succeeded": 11, "failed": 5, "success_rate": 11 / 16},
        "backlog": 3,
    }  # fmt: skip


def test_idle_disabled_and_empty_applications_say_so() -> None:
    assert summarize([_endpoint()], [_stats()]).health == "idle"
    assert summarize([_endpoint(), _endpoint()], [_stats(), _stats(success=LATE)]).health == (
        "healthy"
    )
    assert summarize([_endpoint(disabled=True)], [_stats()]).health == "disabled"
    empty = summarize([], [])
    assert empty.health == NO_ENDPOINTS and empty.last_hour == Volume(0, 0)
    assert empty.last_hour.success_rate is None
    assert volume_cells(empty) == [0, "-", 0, "-", 0]


def test_without_stats_an_application_shows_its_endpoints_alone() -> None:
    # The key lacks deliveries:read: no figure is made up.
    counted = summarize([_endpoint(), _endpoint(disabled=True)], None)
    assert (counted.endpoints, counted.disabled) == (2, 1)
    assert [counted.health, counted.failing, counted.last_hour, counted.backlog] == [None] * 4
    assert summarize([], None).health == NO_ENDPOINTS
    assert (word(counted), endpoint_cells(counted)) == ("-", [2, 1, "-"])
    assert volume_cells(counted) == ["-"] * 5
    assert counted.as_json()["last_hour"] is None and counted.as_json()["endpoints"] == 2


@pytest.fixture
def http() -> Iterator[aioresponses]:
    with aioresponses() as mocked:
        yield mocked


@pytest.fixture
async def api() -> AsyncIterator[AdminApi]:
    async with aiohttp.ClientSession() as session:
        yield AdminApi(session, BASE, "k")


def _route(path: str) -> re.Pattern[str]:
    return re.compile(rf"^{re.escape(BASE + path)}(\?.*)?$")


def _answer(http: aioresponses, path: str, payload: Any, status: int = 200) -> None:
    http.get(
        _route(path), status=status, payload=payload, repeat=True, response_class=CompatResponse
    )


def _endpoints(http: aioresponses, app: str, endpoints: list[dict[str, Any]]) -> None:
    _answer(http, f"/v1/applications/{app}/endpoints", {"data": endpoints, "next_cursor": None})


def _problem(status: int) -> dict[str, Any]:
    return {"type": "about:blank", "title": "no", "status": status, "detail": "no"}


async def test_each_listed_application_gets_its_own_endpoints_figures(
    http: aioresponses, api: AdminApi
) -> None:
    _endpoints(http, "app_a", [_endpoint(endpoint_id="ep_a1"), _endpoint(endpoint_id="ep_a2")])
    _answer(http, "/v1/applications/app_a/endpoints/ep_a1/stats", _stats((2, 0), success=LATE))
    # Deleted between the list and its stats: left out, not an error.
    _answer(http, "/v1/applications/app_a/endpoints/ep_a2/stats", _problem(404), 404)
    _endpoints(http, "app_b", [])
    # Deleted since the applications were listed.
    _answer(http, "/v1/applications/app_gone/endpoints", _problem(404), 404)
    found = await summaries(api, [{"id": "app_a"}, {"id": "app_b"}, {"id": "app_gone"}])
    a, b, gone = found
    assert a is not None and (a.endpoints, a.health, a.last_hour) == (1, "healthy", Volume(2, 0))
    assert b is not None and b.health == NO_ENDPOINTS
    assert gone is None
    # Asked for alone, a missing application is the API's 404.
    with pytest.raises(APIError) as missing:
        await summary(api, "app_gone")
    assert missing.value.status == 404


async def test_what_the_key_may_not_read_is_left_unknown(http: aioresponses, api: AdminApi) -> None:
    # No endpoints:read: nothing is known; no deliveries:read: the endpoints alone.
    _answer(http, "/v1/applications/app_a/endpoints", _problem(403), 403)
    _endpoints(http, "app_b", [_endpoint(), _endpoint(disabled=True, endpoint_id="ep_2")])
    _answer(http, "/v1/applications/app_b/endpoints/ep_1/stats", _problem(403), 403)
    _answer(http, "/v1/applications/app_b/endpoints/ep_2/stats", _problem(403), 403)
    assert await summary(api, "app_a") == UNSEEN
    counted = await summary(api, "app_b")
    assert (counted.endpoints, counted.disabled, counted.health, counted.last_hour) == (
        2, 1, None, None,
    )  # fmt: skip
    # Any other failure is the caller's to report.
    _answer(http, "/v1/applications/app_c/endpoints", _problem(503), 503)
    with pytest.raises(APIError):
        await summary(api, "app_c")


async def test_no_more_requests_than_the_gate_allows_are_in_flight(
    http: aioresponses, api: AdminApi
) -> None:
    flight = {"now": 0, "most": 0}

    async def slow(_url: Any, **_kwargs: Any) -> CallbackResult:
        flight["now"] += 1
        flight["most"] = max(flight["most"], flight["now"])
        await asyncio.sleep(0.01)
        flight["now"] -= 1
        return CallbackResult(payload=_stats(), response_class=CompatResponse)

    many = [_endpoint(endpoint_id=f"ep_{n}") for n in range(6)]
    apps = [{"id": f"app_{n}"} for n in range(4)]
    for app in apps:
        _endpoints(http, app["id"], many)
    http.get(
        re.compile(rf"^{re.escape(BASE)}/v1/applications/app_\d/endpoints/ep_\d/stats$"),
        callback=slow, repeat=True, response_class=CompatResponse,
    )  # fmt: skip
    found = await summaries(api, apps, concurrency=3)
    assert all(s is not None and s.endpoints == 6 for s in found)
    assert flight["most"] == 3
