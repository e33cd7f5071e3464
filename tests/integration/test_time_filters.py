"""History time filters: what they refuse (times before 1970, windows that end before they
start) everywhere one is parsed, and how long a page whose filters rarely meet may scan."""

from __future__ import annotations

import asyncio
import secrets

from redis.asyncio import Redis

from tests.integration.conftest import (
    Api,
    create_endpoint,
    delivery_statuses,
    send_event,
    wait_for,
)
from tests.support.receiver import Receiver
from tests.support.stack import Stack
from webhook_service.ids import new_id
from webhook_service.store.events import EventStore
from webhook_service.store.scripts import Scripts
from webhook_service.timeutil import now_ms

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


async def _accept_many(events: EventStore, sent: list[tuple[str, str]]) -> list[str]:
    """Events straight through the ingest script (the API would take minutes), in order:
    (key id, type) each. Their ids, in the same order."""
    ids: list[str] = []
    for start in range(0, len(sent), 50):
        chunk = []
        for key_id, event_type in sent[start : start + 50]:
            at = now_ms()
            event_id = new_id("msg", at)
            ids.append(event_id)
            chunk.append(
                events.accept(
                    event_id=event_id, event_type=event_type, body="{}", key_id=key_id,
                    now_ms=at, budget=1, grace_ms=30_000, idempotency=None, wakeup=None,
                    backlog_max=1_000_000,
                )
            )  # fmt: skip
        await asyncio.gather(*chunk)
    return ids


async def test_a_sparse_page_answers_early_and_its_cursors_find_every_match(
    api: Api, stack: Stack
) -> None:
    tag = secrets.token_hex(4)
    mine, theirs = f"key_mine{tag}", f"key_theirs{tag}"
    wanted, other = f"sparse.wanted{tag}", f"sparse.other{tag}"
    # Six matches (mine, wanted) among older events, then only events that meet one filter
    # or the other: more than a page's whole budget of 5000 entries of either index.
    older = [(mine, other), (theirs, wanted)] * 150
    for n in range(6):
        older.insert(n * 50, (mine, wanted))
    newer = [(mine, other)] * 5100 + [(theirs, wanted)] * 5300
    client = Redis.from_url(stack.valkey.url, decode_responses=True)
    try:
        events = EventStore(client, Scripts(client))
        ids = await _accept_many(events, older + newer)
    finally:
        await client.aclose()
    sent = dict(zip(ids, older + newer, strict=True))
    matches = sorted((i for i, s in sent.items() if s == (mine, wanted)), reverse=True)
    assert len(matches) == 6

    query = f"/v1/events?type={wanted}&key_id={mine}&limit=1"
    status, page, _ = await api.call("GET", query)
    assert status == 200 and page["data"] == [] and page["next_cursor"], page
    # The smallest index (mine) has 5100 newer entries without a match: the page gave up
    # on time, before its 5000-entry budget (the cursor is the last entry it read).
    scanned = [i for i, (key, _) in sent.items() if key == mine and i >= page["next_cursor"]]
    assert 0 < len(scanned) < 5000

    found, cursor, pages = [], page["next_cursor"], 1
    while cursor is not None:
        status, page, _ = await api.call("GET", f"{query}&cursor={cursor}")
        assert status == 200, page
        found += [e["id"] for e in page["data"]]
        cursor, pages = page["next_cursor"], pages + 1
    assert found == matches  # none lost, none twice, newest first
    assert pages > len(matches)
