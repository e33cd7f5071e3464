"""Deleting an application (issue 16 item 7), against the real API, Valkey, Celery workers,
the scheduler's shipper and a receiver that verifies every request with the endpoint's own
secret, on each log backend.

Under load, to the application being deleted and to another one: the deleted one answers
404 everywhere at once, its endpoints are gone, nothing of it is attempted after its job
ended, nothing of it is left in SQL nor, once released, in Redis, and the other one got
every event exactly once. The job survives the API process that ran it being killed mid-way:
another API process takes it up. And the refusals: 409 for the default application, 403
for a key bound to the application (404 for one bound to another, as everywhere), 404 for
one that does not exist."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest
import sqlalchemy as sa
from redis.asyncio import Redis

from tests.integration.conftest import Api, settings_for, wait_for
from tests.support.api_process import api_url, start_api
from tests.support.apikeys import make_key, redis_contents
from tests.support.postgres import log_env
from tests.support.receiver import Receiver
from tests.support.stack import Stack, start_stack
from webhook_service.history import tables
from webhook_service.history.database import sync_engine
from webhook_service.store import keys
from webhook_service.store.applications import DEFAULT_APP_ID
from webhook_service.store.keys import QUEUE_FRESH
from webhook_service.timeutil import parse_iso

pytestmark = pytest.mark.both_logs

TYPE = "order.placed"
# What the job owns a job by, in api/jobs.py: a process killed holding it is taken over
# this long after.
JOB_LEASE_SECONDS = 30


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest, log_backend: str
) -> Iterator[Stack]:
    # Finished work leaves Redis a second after the log has it, so that "nothing left in
    # Redis once released" is seen within the test.
    extra = {"WEBHOOK_HOT_SECONDS": "1", **log_env(request, log_backend)}
    running = start_stack(tmp_path_factory.mktemp("stack"), extra, workers=2)
    yield running
    running.stop()


@pytest.fixture
async def store(stack: Stack) -> AsyncIterator[Redis]:
    client = Redis.from_url(stack.valkey.url, decode_responses=True)
    yield client
    await client.aclose()


async def new_app(api: Api, name: str, **fields: Any) -> dict[str, Any]:
    status, body, _ = await api.call("POST", "/v1/applications", json={"name": name, **fields})
    assert status == 201, body
    created: dict[str, Any] = body
    return created


async def new_endpoint(api: Api, receiver: Receiver, app: str, name: str) -> dict[str, Any]:
    status, body, _ = await api.call(
        "POST",
        f"/v1/applications/{app}/endpoints",
        json={"url": receiver.url(name), "event_types": [TYPE]},
    )
    assert status == 201, body
    receiver.secrets.setdefault(name, []).append(body["secret"])
    created: dict[str, Any] = body
    return created


async def job_of(api: Api, job_id: str) -> dict[str, Any]:
    status, job, _ = await api.call("GET", f"/v1/jobs/{job_id}")
    assert status == 200, job
    found: dict[str, Any] = job
    return found


async def finished(api: Api, job_id: str, timeout: float = 60.0) -> dict[str, Any]:
    async def done() -> bool:
        return bool((await job_of(api, job_id))["state"] == "done")

    await wait_for(done, timeout=timeout, every=0.1)
    return await job_of(api, job_id)


def log_rows(stack: Stack, app_id: str, event_ids: set[str]) -> dict[str, int]:
    """What the SQL log holds of the application: rows by its id, and by its events' ids
    (attempts carry no application: their delivery ids start with their event's body)."""
    engine = sync_engine(settings_for(stack))
    e, d, a = tables.events.c, tables.deliveries.c, tables.attempts.c
    heads = [f"dlv_{event_id[4:]}" for event_id in event_ids]
    try:
        with engine.connect() as conn:

            def count(statement: sa.Select[int]) -> int:
                return conn.execute(statement).scalar_one()

            return {
                "events": count(
                    sa.select(sa.func.count()).where(
                        sa.or_(e.application == app_id, e.id.in_(event_ids))
                    )
                ),
                "deliveries": count(
                    sa.select(sa.func.count()).where(
                        sa.or_(d.application == app_id, d.event_id.in_(event_ids))
                    )
                ),
                "attempts": count(
                    sa.select(sa.func.count()).where(
                        sa.or_(sa.false(), *(a.delivery_id.startswith(h) for h in heads))
                    )
                ),
            }
    finally:
        engine.dispose()


def application_rows(stack: Stack, app_id: str) -> int:
    engine = sync_engine(settings_for(stack))
    try:
        with engine.connect() as conn:
            return int(
                conn.execute(
                    sa.select(sa.func.count()).where(tables.events.c.application == app_id)
                ).scalar_one()
            )
    finally:
        engine.dispose()


class Load:
    """Events to two applications at a steady rate, each send's start and answer noted."""

    def __init__(self, api: Api, apps: list[str], per_second: float) -> None:
        self._api = api
        self._apps = apps
        self._every = 1 / per_second
        self.sent: list[tuple[str, float, int, str | None]] = []  # app, started, status, id
        self._stop = asyncio.Event()

    async def run(self) -> None:
        n = 0
        while not self._stop.is_set():
            app = self._apps[n % len(self._apps)]
            started = time.monotonic()
            headers = {"Idempotency-Key": f"load-{n}"} if n % 10 == 0 else None
            status, body, _ = await self._api.call(
                "POST",
                f"/v1/applications/{app}/events",
                json={"type": TYPE, "data": {"n": n}},
                headers=headers,
            )
            self.sent.append((app, started, status, body.get("id") if status == 202 else None))
            n += 1
            await asyncio.sleep(self._every)

    def stop(self) -> None:
        self._stop.set()

    def accepted(self, app: str) -> set[str]:
        return {i for a, _, s, i in self.sent if a == app and s == 202 and i is not None}


async def test_deleting_an_application_under_load(
    stack: Stack, api: Api, receiver: Receiver, store: Redis
) -> None:
    gone = await new_app(api, "Leaving", uid="leaving-customer")
    stays = await new_app(api, "Staying", uid="staying-customer")
    gone_id, stays_id = gone["id"], stays["id"]
    # One answers at once, one slowly (sends are in flight when it goes), one fails every
    # time (its deliveries wait for retries).
    mine = [await new_endpoint(api, receiver, gone_id, n) for n in ("g-ok", "g-slow", "g-500")]
    receiver.slow["g-slow"] = 0.5
    receiver.behaviours["g-500"] = lambda _name, _n: 500
    for name in ("s-1", "s-2"):
        await new_endpoint(api, receiver, stays_id, name)
    bound = await make_key(api, ["events:write", "endpoints:read"], application=gone_id)

    load = Load(api, [gone_id, stays_id], per_second=40)
    sending = asyncio.create_task(load.run())

    async def delivering() -> bool:
        return len(receiver.for_endpoint("g-ok")) >= 20 and bool(receiver.for_endpoint("s-1"))

    await wait_for(delivering, timeout=60)
    status, job, headers = await api.call("DELETE", "/v1/applications/leaving-customer")
    deleted_at = time.monotonic()
    assert status == 202, job
    assert headers["Location"] == f"/v1/jobs/{job['id']}"
    assert (job["kind"], job["state"], job["application"]) == (
        "delete-application", "running", gone_id,
    )  # fmt: skip
    await asyncio.sleep(2.0)
    load.stop()
    await sending

    # Gone for every route at once: every send to it that began after the answer is a 404.
    after = [s for a, started, s, _ in load.sent if a == gone_id and started > deleted_at]
    assert after and set(after) == {404}, after
    for method, path in (
        ("GET", f"/v1/applications/{gone_id}"),
        ("GET", "/v1/applications/leaving-customer"),
        ("GET", f"/v1/applications/{gone_id}/endpoints"),
        ("GET", f"/v1/applications/{gone_id}/endpoints/{mine[0]['id']}"),
        ("GET", f"/v1/applications/{gone_id}/events"),
        ("GET", f"/v1/applications/{gone_id}/deliveries"),
        ("GET", f"/v1/events?application={gone_id}"),
        ("GET", f"/v1/deliveries?application={gone_id}"),
        ("DELETE", f"/v1/applications/{gone_id}"),
    ):
        status, problem, _ = await api.call(method, path)
        assert status == 404, (method, path, problem)
    status, listed, _ = await api.call("GET", "/v1/applications?uid=leaving-customer")
    assert status == 200 and listed["data"] == [], listed

    done = await finished(api, job["id"])
    done_at = time.monotonic() - (time.time() - parse_iso(done["updated_at"]) / 1000)
    gone_events = load.accepted(gone_id)
    assert done["step"] == "done"
    assert done["endpoints_deleted"] == 3
    assert done["deliveries_ended"] > 0
    assert done["api_keys_revoked"] == 1
    # Every event it was sent is purged, with every one of its deliveries (one each per
    # endpoint) and every attempt the log had of them.
    assert done["events_purged"] == len(gone_events)
    assert done["deliveries_purged"] == 3 * len(gone_events)
    assert done["attempts_purged"] > 0
    # The key bound to it is revoked.
    status, _, _ = await api.call("GET", "/v1/endpoints", key=bound["key"])
    assert status == 401

    # The other application got every event exactly once, at each endpoint, verified.
    stays_events = load.accepted(stays_id)
    assert len(stays_events) >= 50

    async def all_arrived() -> bool:
        return all(receiver.taken[(n, i)] for n in ("s-1", "s-2") for i in stays_events)

    await wait_for(all_arrived, timeout=60)
    await asyncio.sleep(1.0)  # time enough for a duplicate to show
    for name in ("s-1", "s-2"):
        got = receiver.for_endpoint(name)
        assert all(r.verified for r in got)
        assert sorted(r.webhook_id for r in got) == sorted(stays_events)
    assert application_rows(stack, stays_id) == len(stays_events)

    # Nothing of the deleted one is attempted after its job ended.
    await asyncio.sleep(2.0)
    for name in ("g-ok", "g-slow", "g-500"):
        late = [r for r in receiver.for_endpoint(name) if r.at > done_at]
        assert late == [], name

    # Nothing of it left in SQL.
    assert log_rows(stack, gone_id, gone_events) == {"events": 0, "deliveries": 0, "attempts": 0}

    # Nor in Redis once its finished work is released (a second after the log had it).
    ids = [gone_id, *(e["id"] for e in mine), *gone_events]

    async def released() -> bool:
        # Its bucket's endpoints:seqs keeps its endpoints' tails for good (below), and its
        # bucket's note of the newest wake-up queued (a task id: an event's, and a message's)
        # lasts until the bucket's next one.
        bucket = keys.bucket_of(gone_id)
        kept = (
            keys.job(job["id"]), keys.endpoint_seqs(bucket), keys.wakeup(bucket, QUEUE_FRESH),
        )  # fmt: skip
        contents = await redis_contents(store, skip=kept)
        text = repr(contents)
        return not any(i in text for i in ids)

    await wait_for(released, timeout=30)
    # Its endpoints' sequence numbers stay mapped, as any deleted endpoint's do: a delivery
    # id names its endpoint by it (keys.py, "Derived fields").
    seqs = await store.hgetall(keys.endpoint_seqs(keys.bucket_of(gone_id)))
    assert {e["id"] for e in mine} <= set(seqs.values())


async def test_the_default_a_bound_key_and_a_missing_application_are_refused(
    api: Api, receiver: Receiver
) -> None:
    # Made yet or not (on its first use), by its uid or its id.
    for ref in ("default", DEFAULT_APP_ID):
        status, problem, _ = await api.call("DELETE", f"/v1/applications/{ref}")
        assert status == 409, problem
        assert problem["type"].endswith("/conflict")

    own = await new_app(api, "Bound", uid="bound-owner")
    other = await new_app(api, "Other")
    bound = await make_key(api, ["applications:write", "applications:read"], application=own["id"])
    # A bound key may not delete its own application; any other is not there for it.
    for ref in (own["id"], "bound-owner"):
        status, problem, _ = await api.call("DELETE", f"/v1/applications/{ref}", key=bound["key"])
        assert status == 403, problem
        assert problem["type"].endswith("/bound-key")
    for ref in (other["id"], "no-such-application", "default"):
        status, problem, _ = await api.call("DELETE", f"/v1/applications/{ref}", key=bound["key"])
        assert status == 404, problem
    # Without the scope.
    reader = await make_key(api, ["applications:read"])
    status, problem, _ = await api.call(
        "DELETE", f"/v1/applications/{other['id']}", key=reader["key"]
    )
    assert status == 403, problem

    for ref in ("no-such-application", "app_01J0000000000000000000000Z"):
        status, problem, _ = await api.call("DELETE", f"/v1/applications/{ref}")
        assert status == 404, problem
    status, _, _ = await api.call("GET", f"/v1/applications/{other['id']}")
    assert status == 200

    # An application with nothing in it goes as well, and a second DELETE finds nothing.
    status, job, _ = await api.call("DELETE", f"/v1/applications/{other['id']}")
    assert status == 202, job
    done = await finished(api, job["id"])
    assert (done["endpoints_deleted"], done["deliveries_ended"], done["events_purged"]) == (0, 0, 0)
    status, _, _ = await api.call("DELETE", f"/v1/applications/{other['id']}")
    assert status == 404


async def test_the_job_survives_its_api_process_being_killed(
    stack: Stack, receiver: Receiver, log_backend: str
) -> None:
    if log_backend != "sqlite":
        pytest.skip("the API process is what is killed here, not the log: one backend is enough")
    start_api(stack, "api-first")
    async with aiohttp.ClientSession() as session:
        first = Api(session, api_url(stack, "api-first"))
        app = await new_app(first, "Crashing")
        endpoint = await new_endpoint(first, receiver, app["id"], "crash-1")
        # It never answers: its deliveries are pending when the job ends them, so the job
        # has records to wait for the log to hold.
        receiver.hang.add("crash-1")
        sent = set()
        for n in range(30):
            status, body, _ = await first.call(
                "POST",
                f"/v1/applications/{app['id']}/events",
                json={"type": TYPE, "data": {"n": n}},
            )
            assert status == 202, body
            sent.add(body["id"])

        async def shipped() -> bool:
            return application_rows(stack, app["id"]) == len(sent)

        await wait_for(shipped, timeout=30)
        # No shipper: the job stops at waiting for the log, and the process running it dies.
        stack.kill("scheduler")
        try:
            status, job, _ = await first.call("DELETE", f"/v1/applications/{app['id']}")
            assert status == 202, job

            async def waiting_for_the_log() -> bool:
                return bool((await job_of(first, job["id"]))["step"] == "log")

            await wait_for(waiting_for_the_log, timeout=30)
            stack.kill("api-first")
        finally:
            stack.relaunch("scheduler")

        start_api(stack, "api-second")
        second = Api(session, api_url(stack, "api-second"))
        assert (await job_of(second, job["id"]))["state"] == "running"
        # Taken up once the dead process's hold on it runs out.
        done = await finished(second, job["id"], timeout=JOB_LEASE_SECONDS + 30)
        assert done["endpoints_deleted"] == 1
        assert done["deliveries_ended"] == len(sent)
        assert done["events_purged"] == len(sent)
        assert done["deliveries_purged"] == len(sent)
        assert log_rows(stack, app["id"], sent) == {"events": 0, "deliveries": 0, "attempts": 0}
        status, _, _ = await second.call("GET", f"/v1/applications/{app['id']}/endpoints")
        assert status == 404
        assert endpoint["id"]
        stack.terminate("api-second")
