"""The history read from a hot standby of the PostgreSQL log (WEBHOOK_LOG_READ_URL), on the
real stack: the shipper writes to the primary, the history routes read the standby (a
standby that is down answers them 503 while ingest, delivery and the primary's log go on),
a revival reads the primary however far behind the standby is, and /metrics reports the
standby's replay lag."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from functools import partial
from typing import Any

import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr
from redis.asyncio import Redis
from sqlalchemy.engine import make_url

from tests.integration.conftest import (
    Api,
    create_endpoint,
    send_event,
    serve_api,
    settings_for,
    wait_for,
)
from tests.support.logged import wait_logged
from tests.support.postgres import Postgres, start_replica, wait_replayed
from tests.support.receiver import Receiver
from tests.support.stack import ADMIN_KEY, Stack, start_stack
from webhook_service.history.database import LogUnconfigured
from webhook_service.store import keys

pytestmark = pytest.mark.integration

PROBLEMS = "https://webhook-service.dev/problems/"
LAG = "webhook_log_read_lag_seconds"


@pytest.fixture(scope="module")
def replica(postgres: Postgres) -> Iterator[Postgres]:
    standby = start_replica(postgres)
    yield standby
    standby.destroy()


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, postgres: Postgres, replica: Postgres
) -> Iterator[Stack]:
    """The log on the primary, the history read from the same database on the standby. A
    finished delivery leaves Redis a second after it is logged, so that reading it by id
    reads the log too."""
    log_url = postgres.create_database()
    database = make_url(log_url).database
    assert database is not None
    env = {
        "WEBHOOK_LOG_URL": log_url,
        "WEBHOOK_LOG_READ_URL": replica.url(database),
        "WEBHOOK_HOT_SECONDS": "1",
    }
    running = start_stack(tmp_path_factory.mktemp("stack"), env)
    yield running
    running.stop()


async def _get(api: Api, path: str) -> Any:
    status, body, _ = await api.call("GET", path)
    assert status == 200, (path, body)
    return body


async def _caught_up(stack: Stack, primary: Postgres, replica: Postgres) -> None:
    """Every log record so far committed on the primary and replayed by the standby."""
    await wait_logged(stack.valkey.url)
    await asyncio.to_thread(wait_replayed, primary, replica)


async def _logged_on_primary(stack: Stack, endpoint_id: str) -> int:
    """The endpoint's deliveries the primary's log has finished (succeeded)."""
    async with await psycopg.AsyncConnection.connect(stack.env["WEBHOOK_LOG_URL"]) as conn:
        cursor = await conn.execute(
            "SELECT count(*) FROM deliveries WHERE endpoint_id = %s AND status = 'succeeded'",
            (endpoint_id,),
        )
        row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


async def _read_lag(api: Api) -> float | None:
    """The standby's replay lag /metrics reports; None: left out."""
    async with api.session.get(
        api.base + "/metrics", headers={"Authorization": f"Bearer {ADMIN_KEY}"}
    ) as response:
        assert response.status == 200
        text = await response.text()
    for family in text_string_to_metric_families(text):
        if family.name == LAG:
            return float(family.samples[0].value)
    return None


async def _succeeded(api: Api, event_ids: list[str]) -> bool:
    for event_id in event_ids:
        event = await _get(api, f"/v1/events/{event_id}")
        if [d["status"] for d in event["deliveries"]] != ["succeeded"]:
            return False
    return True


async def test_history_read_from_the_standby_while_the_primary_takes_the_log(
    api: Api, receiver: Receiver, stack: Stack, postgres: Postgres, replica: Postgres
) -> None:
    endpoint = await create_endpoint(api, receiver, "standby", ["standby.read"])
    listing = f"/v1/deliveries?endpoint_id={endpoint['id']}"
    sent = [await send_event(api, "standby.read", {"n": n}) for n in range(3)]
    await wait_for(lambda: _succeeded(api, sent))
    await _caught_up(stack, postgres, replica)

    listed = (await _get(api, listing))["data"]
    assert sorted(d["event_id"] for d in listed) == sorted(sent)
    assert {d["status"] for d in listed} == {"succeeded"}
    (attempt,) = (await _get(api, f"/v1/deliveries/{listed[0]['id']}"))["attempt_log"]
    assert attempt["status_code"] == 200
    # Caught up: 0, or while WAL with no commit (a checkpoint's) is replayed, the age of the
    # last commit replayed.
    lag = await _read_lag(api)
    assert lag is not None and 0 <= lag < 10

    replica.stop()
    try:
        # The lists are the standby's alone: with it down they answer 503, though the
        # primary is up. So does a finished delivery by id once it has left Redis.
        status, problem, headers = await api.call("GET", listing)
        assert status == 503, problem
        assert headers["Content-Type"].startswith("application/problem+json")
        assert problem["type"] == PROBLEMS + "log-unavailable" and headers["Retry-After"]

        async def by_id_unavailable() -> bool:
            status, _, _ = await api.call("GET", f"/v1/deliveries/{listed[0]['id']}")
            return status == 503

        await wait_for(by_id_unavailable, timeout=15)
        assert await _read_lag(api) is None

        # Ingest, delivery and the shipper's writes need only Redis and the primary.
        more = [await send_event(api, "standby.read", {"n": n}) for n in range(3, 6)]
        await wait_for(lambda: _succeeded(api, more))
        await wait_logged(stack.valkey.url)
        assert await _logged_on_primary(stack, endpoint["id"]) == 6
        assert len(receiver.for_endpoint("standby")) == 6
    finally:
        replica.start()

    await _caught_up(stack, postgres, replica)
    listed = (await _get(api, listing))["data"]
    assert sorted(d["event_id"] for d in listed) == sorted(sent + more)


async def _received(receiver: Receiver, name: str, count: int) -> bool:
    return len(receiver.for_endpoint(name)) == count


async def _gone(stack: Stack, delivery_id: str) -> bool:
    """Whether the delivery has left Redis: the log alone holds it."""
    client = Redis.from_url(stack.valkey.url)
    try:
        return not await client.exists(keys.delivery(delivery_id))
    finally:
        await client.aclose()


async def test_a_revival_reads_the_primary_however_far_behind_the_standby_is(
    api: Api, receiver: Receiver, stack: Stack, postgres: Postgres, replica: Postgres
) -> None:
    """A retry of what has left Redis numbers its attempt after the count it revives: read
    from a standby whose replay is paused, the second retry would number its attempt 2
    again."""
    await create_endpoint(api, receiver, "standby-retry", ["standby.retry"])
    event_id = await send_event(api, "standby.retry", {"n": 1})
    await wait_for(lambda: _received(receiver, "standby-retry", 1))
    await _caught_up(stack, postgres, replica)
    (delivery,) = (await _get(api, f"/v1/deliveries?event_id={event_id}"))["data"]
    retry = f"/v1/deliveries/{delivery['id']}/retry"
    await wait_for(lambda: _gone(stack, delivery["id"]), timeout=15)

    await asyncio.to_thread(replica.execute, "SELECT pg_wal_replay_pause()")
    try:
        for sent in (2, 3):
            status, retried, _ = await api.call("POST", retry)
            assert status == 202, retried
            await wait_for(partial(_received, receiver, "standby-retry", sent))
            await wait_logged(stack.valkey.url)
            await wait_for(lambda: _gone(stack, delivery["id"]), timeout=15)
        # The standby has received what it has not replayed: its lag grows.
        lag = await _read_lag(api)
        assert lag is not None and lag > 0
    finally:
        await asyncio.to_thread(replica.execute, "SELECT pg_wal_replay_resume()")

    await _caught_up(stack, postgres, replica)
    attempts = (await _get(api, f"/v1/deliveries/{delivery['id']}"))["attempt_log"]
    assert [(a["number"], a["status_code"]) for a in attempts] == [(1, 200), (2, 200), (3, 200)]


async def test_an_api_refuses_a_read_url_that_is_not_postgresql(stack: Stack) -> None:
    settings = settings_for(stack).model_copy(
        update={"log_read_url": SecretStr("mysql://whs:secret@standby/whs_log")}
    )
    with pytest.raises(LogUnconfigured, match=r"^WEBHOOK_LOG_READ_URL must be postgresql://"):
        async with serve_api(settings):
            pass


def test_the_command_refuses_a_read_url_that_is_not_postgresql_in_one_line(stack: Stack) -> None:
    env = {**stack.env, "WEBHOOK_LOG_READ_URL": "mysql://whs:secret@standby/whs_log"}
    ran = subprocess.run(
        [sys.executable, "-m", "webhook_service", "api"],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    output = ran.stdout + ran.stderr
    assert ran.returncode == 1, output
    assert "WEBHOOK_LOG_READ_URL must be postgresql://" in output
    assert "Traceback" not in output
    assert "secret" not in output
