"""History time filters: what they refuse (times before 1970, windows that end before they
start) everywhere one is parsed (how long a page whose filters rarely meet may read:
history/test_reader.py)."""

from __future__ import annotations

import asyncio

from tests.integration.conftest import (
    Api,
    create_endpoint,
    delivery_statuses,
    send_event,
    wait_for,
)
from tests.support.receiver import Receiver

BEFORE_1970 = "1969-12-31T23:59:59Z"


def _pointer(problem: dict[str, object]) -> object:
    errors = problem["errors"]
    assert isinstance(errors, list)
    return errors[0]["pointer"]


async def test_times_before_1970_are_refused_and_nothing_is_sent_again(
    api: Api, receiver: Receiver
) -> None:
    endpoint = await create_endpoint(api, receiver, "epoch", ["epoch.thing"])
    event_id = await send_event(api, "epoch.thing", {})

    async def succeeded() -> bool:
        return (await delivery_statuses(api, event_id)) == {endpoint["id"]: "succeeded"}

    await wait_for(succeeded)
    for method, path in [
        ("GET", "/v1/events"),
        ("GET", "/v1/deliveries"),
        ("POST", "/v1/deliveries/retry"),
        ("POST", "/v1/deliveries/retry?status=succeeded&"),
    ]:
        joiner = "" if path.endswith("&") else "?"
        for name in ("since", "until"):
            status, problem, _ = await api.call(method, f"{path}{joiner}{name}={BEFORE_1970}")
            assert (status, _pointer(problem)) == (422, f"#/query/{name}"), (path, problem)

    recover = f"/v1/endpoints/{endpoint['id']}/recover"
    for body, field in [
        ({"since": BEFORE_1970}, "/since"),
        ({"since": "2026-01-01T00:00:00Z", "until": BEFORE_1970}, "/until"),
    ]:
        status, problem, _ = await api.call("POST", recover, json=body)
        assert (status, _pointer(problem)) == (422, field), problem

    # Had any of them run, the succeeded delivery would have gone out again.
    await asyncio.sleep(1.0)
    assert len(receiver.for_endpoint("epoch")) == 1
    _, delivery, _ = await api.call("GET", f"/v1/deliveries?event_id={event_id}")
    assert [(d["status"], d["attempts"]) for d in delivery["data"]] == [("succeeded", 1)]


async def test_a_window_that_ends_before_it_starts_is_refused(api: Api) -> None:
    window = "since=2026-02-01T00:00:00Z&until=2026-01-31T23:59:59Z"
    for method, path in [
        ("GET", "/v1/events"),
        ("GET", "/v1/deliveries"),
        ("POST", "/v1/deliveries/retry"),
    ]:
        status, problem, _ = await api.call(method, f"{path}?{window}")
        assert (status, _pointer(problem)) == (422, "#/query/until"), (path, problem)
    # One instant, though, is a window.
    same = "since=2026-02-01T00:00:00Z&until=2026-02-01T00:00:00Z"
    assert (await api.call("GET", f"/v1/events?{same}"))[0] == 200
