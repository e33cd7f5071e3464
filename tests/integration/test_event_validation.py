"""Ingest against the catalog's schemas, on the real stack (Valkey, workers, the SQL log):
with WEBHOOK_VALIDATE_EVENTS=enforce a bad event is a 422 pointing at the field and nothing
is stored; with warn it is stored, counted on /metrics and logged; off checks nothing; a
replay of an event stored under warn is not checked again; a type without a schema, or
archived, is never checked."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.conftest import Api, create_endpoint, serve_api, settings_for, wait_for
from tests.integration.test_event_types import create, fresh
from tests.support.receiver import Receiver
from tests.support.stack import ADMIN_KEY, Stack

pytestmark = pytest.mark.integration

SCHEMA = {
    "type": "object",
    "required": ["amount"],
    "properties": {"amount": {"type": "integer"}, "note": {"type": "string"}},
}
BAD = {"amount": "12", "note": 3}


@asynccontextmanager
async def api_in(stack: Stack, mode: Literal["off", "warn", "enforce"]) -> AsyncIterator[Api]:
    settings = settings_for(stack).model_copy(update={"validate_events": mode})
    async with serve_api(settings) as (_, api):
        yield api


async def metric(api: Api, name: str, **labels: str) -> float:
    async with api.session.get(
        api.base + "/metrics", headers={"Authorization": f"Bearer {ADMIN_KEY}"}
    ) as response:
        text = await response.text()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return 0.0


async def post(api: Api, event_type: str, data: dict[str, Any]) -> tuple[int, Any]:
    status, body, _ = await api.call("POST", "/v1/events", json={"type": event_type, "data": data})
    return status, body


async def test_enforce_refuses_and_stores_nothing(stack: Stack, api: Api) -> None:
    name = fresh("invoice.enforced")
    await create(api, name=name, schema=SCHEMA)
    async with api_in(stack, "enforce") as enforcing:
        accepted = await metric(enforcing, "webhook_events_accepted_total")
        status, problem = await post(enforcing, name, BAD)
        assert status == 422, problem
        assert problem["type"].endswith("/schema-violation")
        assert sorted(e["pointer"] for e in problem["errors"]) == ["/data/amount", "/data/note"]
        assert all("integer" in e["detail"] or "string" in e["detail"] for e in problem["errors"])
        assert await metric(enforcing, "webhook_events_accepted_total") == accepted
        status, problem = await post(enforcing, name, {"note": "no amount"})
        assert status == 422 and problem["errors"][0]["pointer"] == "/data", problem
        # A good one goes through, and a type of no schema, or none in the catalog, too.
        status, body = await post(enforcing, name, {"amount": 12})
        assert status == 202, body
        assert (await post(enforcing, fresh("uncatalogued"), BAD))[0] == 202
        assert await metric(enforcing, "webhook_events_accepted_total") == accepted + 2


async def test_warn_stores_counts_and_logs(
    stack: Stack, api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    name = fresh("invoice.warned")
    await create(api, name=name, schema=SCHEMA)
    async with api_in(stack, "warn") as warning:
        before = await metric(warning, "webhook_schema_violations_total", event_type=name)
        with caplog.at_level(logging.WARNING, logger="webhook_service.api.validation"):
            status, body = await post(warning, name, BAD)
        assert status == 202, body
        status, stored, _ = await warning.call("GET", f"/v1/events/{body['id']}")
        assert status == 200 and stored["data"] == BAD
        assert await metric(warning, "webhook_schema_violations_total", event_type=name) == (
            before + 1
        )
        lines = [r for r in caplog.records if name in r.getMessage()]
        assert len(lines) == 1, caplog.text
        assert "pointer=/data/amount" in lines[0].getMessage()
        assert lines[0].__dict__["event_id"] == body["id"]
        # A valid one is not counted.
        assert (await post(warning, name, {"amount": 1}))[0] == 202
        assert await metric(warning, "webhook_schema_violations_total", event_type=name) == (
            before + 1
        )


async def test_off_checks_nothing(stack: Stack, api: Api) -> None:
    name = fresh("invoice.unchecked")
    await create(api, name=name, schema=SCHEMA)
    async with api_in(stack, "off") as off:
        assert (await post(off, name, BAD))[0] == 202
        assert await metric(off, "webhook_schema_violations_total", event_type=name) == 0


async def test_archived_types_and_replays_are_not_checked(
    stack: Stack, api: Api, receiver: Receiver
) -> None:
    kept, archived = fresh("invoice.replayed"), fresh("invoice.archived")
    await create(api, name=kept, schema=SCHEMA)
    await create(api, name=archived, schema=SCHEMA)
    status, _, _ = await api.call("DELETE", f"/v1/event-types/{archived}")
    assert status == 200
    async with api_in(stack, "warn") as warning:
        status, body = await post(warning, kept, BAD)
        assert status == 202, body
    endpoint = await create_endpoint(api, receiver, "replayed", [kept])
    async with api_in(stack, "enforce") as enforcing:
        assert (await post(enforcing, archived, BAD))[0] == 202
        status, replayed, _ = await enforcing.call(
            "POST", f"/v1/events/{body['id']}/replay", json={"endpoint_id": endpoint["id"]}
        )
        assert status == 202, replayed

    async def arrived() -> bool:
        return any(
            r.verified and orjson.loads(r.body)["data"] == BAD
            for r in receiver.for_endpoint("replayed")
        )

    await wait_for(arrived)


async def test_a_catalog_change_reaches_a_running_api(stack: Stack, api: Api) -> None:
    name = fresh("invoice.changed")
    await create(api, name=name)
    async with api_in(stack, "enforce") as enforcing:
        assert (await post(enforcing, name, BAD))[0] == 202
        status, _, _ = await api.call("PATCH", f"/v1/event-types/{name}", json={"schema": SCHEMA})
        assert status == 200

        async def refused() -> bool:
            return (await post(enforcing, name, BAD))[0] == 422

        # Its cache looks at the catalog's version at most once a second.
        await wait_for(refused, timeout=10)
