"""The event-type catalog through the real API on the test stack's Valkey: create, read,
list (paged, by group, archived hidden), change, archive and restore, the refusals, and an
OpenAPI 3.1 document's webhooks imported (a $ref into the components, YAML and JSON); and
``webhook-service event-types …`` doing each of those as a subprocess."""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path
from typing import Any

import pytest
import yaml
from redis.asyncio import Redis

from tests.integration.conftest import Api
from tests.integration.test_admin_cli import cli
from tests.support.apikeys import make_key
from tests.support.stack import Stack
from webhook_service.api.scopes import Scope
from webhook_service.store import keys

pytestmark = pytest.mark.integration

SCHEMA = {
    "type": "object",
    "required": ["invoice_id", "amount"],
    "properties": {
        "invoice_id": {"type": "string"},
        "amount": {"type": "integer", "minimum": 0},
    },
}


def fresh(prefix: str) -> str:
    """A type name no other test of the shared stack uses (the catalog is global)."""
    return f"{prefix}.{secrets.token_hex(4)}"


async def create(api: Api, **fields: Any) -> dict[str, Any]:
    status, body, _ = await api.call("POST", "/v1/event-types", json=fields)
    assert status == 201, body
    made: dict[str, Any] = body
    return made


async def test_create_read_change_archive_restore(api: Api) -> None:
    name = fresh("invoice.paid")
    made = await create(
        api,
        name=name,
        description="An invoice was paid.",
        schema=SCHEMA,
        examples=[{"invoice_id": "in_1", "amount": 1999}],
        group="Invoices",
    )
    assert made["schema"] == SCHEMA and made["group"] == "Invoices"
    assert (made["deprecated"], made["archived"]) == (False, False)

    status, got, _ = await api.call("GET", f"/v1/event-types/{name}")
    assert status == 200 and got == made

    status, changed, _ = await api.call(
        "PATCH", f"/v1/event-types/{name}", json={"deprecated": True, "group": None}
    )
    assert status == 200, changed
    assert (changed["deprecated"], changed["group"], changed["schema"]) == (True, None, SCHEMA)

    status, archived, _ = await api.call("DELETE", f"/v1/event-types/{name}")
    assert status == 200 and archived["archived"] is True
    assert name not in (await all_types(api))[1]
    _, everything = await all_types(api, include_archived="true")
    assert name in everything
    # Still readable by name, and its name still taken.
    status, _, _ = await api.call("GET", f"/v1/event-types/{name}")
    assert status == 200
    status, again, _ = await api.call("POST", "/v1/event-types", json={"name": name})
    assert status == 409 and again["type"].endswith("/event-type-exists"), again

    status, restored, _ = await api.call(
        "PATCH", f"/v1/event-types/{name}", json={"archived": False}
    )
    assert status == 200 and restored["archived"] is False
    assert name in (await all_types(api))[1]


async def all_types(api: Api, **query: str) -> tuple[list[dict[str, Any]], set[str]]:
    """Every page of the list."""
    found: list[dict[str, Any]] = []
    cursor = None
    while True:
        params = "&".join(f"{k}={v}" for k, v in {**query, "limit": "2"}.items())
        path = f"/v1/event-types?{params}" + (f"&cursor={cursor}" if cursor else "")
        status, page, _ = await api.call("GET", path)
        assert status == 200, page
        found.extend(page["data"])
        cursor = page["next_cursor"]
        if cursor is None:
            return found, {t["name"] for t in found}


async def test_lists_are_paged_by_name_and_filter_by_group(api: Api) -> None:
    group = "g-" + secrets.token_hex(4)
    names = sorted(fresh("paged") for _ in range(5))
    for name in names:
        await create(api, name=name, group=group)
    await create(api, name=fresh("paged"), group="other-" + group)
    listed, _ = await all_types(api, group=group)
    assert [t["name"] for t in listed] == names
    everything, _ = await all_types(api)
    assert [t["name"] for t in everything] == sorted(t["name"] for t in everything)


@pytest.mark.parametrize(
    ("fields", "pointer"),
    [
        ({"schema": {"type": "bogus"}}, "/schema"),
        ({"schema": {"$ref": "https://example.com/remote.json"}}, "/schema"),
        ({"schema": {"$schema": "http://json-schema.org/draft-07/schema#"}}, "/schema"),
        ({"schema": SCHEMA, "examples": [{"invoice_id": "i", "amount": -1}]}, "/examples/0/amount"),
        ({"schema": SCHEMA, "examples": [{"amount": 5}]}, "/examples/0"),
        ({"name": "not a name"}, "/name"),
        ({"examples": ["text"]}, "/examples/0"),
    ],
)  # fmt: skip
async def test_invalid_definitions_are_422_naming_the_field(
    api: Api, fields: dict[str, Any], pointer: str
) -> None:
    body = {"name": fresh("bad"), **fields}
    status, problem, _ = await api.call("POST", "/v1/event-types", json=body)
    assert status == 422, problem
    assert pointer in [e["pointer"] for e in problem["errors"]], problem
    # Nothing made.
    status, _, _ = await api.call("GET", f"/v1/event-types/{body['name']}")
    assert status == 404


async def test_a_patch_keeps_examples_valid_against_the_schema(api: Api) -> None:
    name = fresh("order.shipped")
    await create(api, name=name, examples=[{"carrier": 7}])
    status, problem, _ = await api.call(
        "PATCH",
        f"/v1/event-types/{name}",
        json={"schema": {"type": "object", "properties": {"carrier": {"type": "string"}}}},
    )
    assert status == 422 and problem["errors"][0]["pointer"] == "/examples/0/carrier", problem
    status, got, _ = await api.call("GET", f"/v1/event-types/{name}")
    assert got["schema"] is None


async def test_scopes_and_bound_keys(api: Api) -> None:
    name = fresh("scoped")
    await create(api, name=name)
    reader = await make_key(api, [Scope.EVENTS_READ])
    writer = await make_key(api, [Scope.EVENT_TYPES_WRITE])
    status, _, _ = await api.call("GET", f"/v1/event-types/{name}", key=reader["key"])
    assert status == 200
    status, problem, _ = await api.call(
        "PATCH", f"/v1/event-types/{name}", json={"deprecated": True}, key=reader["key"]
    )
    assert status == 403 and problem["type"].endswith("/insufficient-scope")
    status, _, _ = await api.call(
        "PATCH", f"/v1/event-types/{name}", json={"deprecated": True}, key=writer["key"]
    )
    assert status == 200

    _, app, _ = await api.call("POST", "/v1/applications", json={"name": "catalog tenant"})
    bound = await make_key(api, [Scope.EVENTS_READ, Scope.EVENT_TYPES_WRITE], application=app["id"])
    status, _, _ = await api.call("GET", "/v1/event-types", key=bound["key"])
    assert status == 200
    for method, path, body in (
        ("POST", "/v1/event-types", {"name": fresh("bound")}),
        ("PATCH", f"/v1/event-types/{name}", {"deprecated": False}),
        ("DELETE", f"/v1/event-types/{name}", None),
        ("POST", "/v1/event-types/import", {"openapi": "3.1.0", "webhooks": {}}),
    ):
        status, problem, _ = await api.call(method, path, json=body, key=bound["key"])
        assert status == 403 and problem["type"].endswith("/bound-key"), (method, path, problem)


def openapi_doc(paid: str, refunded: str, broken: str) -> dict[str, Any]:
    """A small OpenAPI 3.1 document: one webhook by $ref into the components (wrapped in our
    envelope), one inline, one whose example breaks its schema."""
    money = {"type": "object", "required": ["amount"], "properties": {
        "amount": {"type": "integer"}, "currency": {"type": "string"}}}  # fmt: skip
    return {
        "openapi": "3.1.0",
        "info": {"title": "Billing webhooks", "version": "1"},
        "webhooks": {
            paid: {
                "post": {
                    "summary": "An invoice was paid",
                    "tags": ["Invoices"],
                    "requestBody": {
                        "content": {
                            "application/json": {
                                "schema": {"$ref": "#/components/schemas/InvoicePaid"},
                                "example": {
                                    "type": paid,
                                    "timestamp": "2026-01-01T00:00:00Z",
                                    "data": {"invoice_id": "in_1", "total": {"amount": 5}},
                                },
                            }
                        }
                    },
                }
            },
            refunded: {
                "post": {
                    "description": "A refund went out.",
                    "x-group": "Refunds",
                    "deprecated": True,
                    "requestBody": {
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "properties": {"id": {"type": "string"}},
                                },
                                "examples": {"one": {"value": {"id": "re_1"}}},
                            }
                        }
                    },
                }
            },
            broken: {
                "post": {
                    "requestBody": {
                        "content": {
                            "application/json": {
                                "schema": {"type": "object", "required": ["id"]},
                                "example": {"other": 1},
                            }
                        }
                    },
                }
            },
        },
        "components": {
            "schemas": {
                "InvoicePaid": {
                    "type": "object",
                    "properties": {
                        "type": {"type": "string"},
                        "timestamp": {"type": "string"},
                        "data": {"$ref": "#/components/schemas/Invoice"},
                    },
                },
                "Invoice": {
                    "type": "object",
                    "required": ["invoice_id"],
                    "properties": {
                        "invoice_id": {"type": "string"},
                        "total": {"$ref": "#/components/schemas/Money"},
                    },
                },
                "Money": money,
            }
        },
    }


async def test_import_of_an_openapi_document(api: Api) -> None:
    paid, refunded, broken = fresh("invoice.paid"), fresh("refund.sent"), fresh("broken")
    doc = openapi_doc(paid, refunded, broken)
    status, reply, _ = await api.call(
        "POST",
        "/v1/event-types/import",
        data=yaml.safe_dump(doc).encode(),
        headers={"Content-Type": "application/yaml"},
    )
    assert status == 200, reply
    assert sorted(reply["created"]) == sorted([paid, refunded])
    assert (reply["updated"], reply["unchanged"]) == ([], [])
    assert [(e["name"], e["pointer"]) for e in reply["errors"]] == [(broken, f"/webhooks/{broken}")]
    assert "/examples/0" in reply["errors"][0]["detail"]

    _, got, _ = await api.call("GET", f"/v1/event-types/{paid}")
    assert (got["description"], got["group"], got["deprecated"]) == (
        "An invoice was paid", "Invoices", False,
    )  # fmt: skip
    # The envelope's data, standing alone: its references copied into $defs.
    assert got["schema"]["$ref"] == "#/$defs/Invoice"
    assert set(got["schema"]["$defs"]) == {"Invoice", "Money"}
    assert got["examples"] == [{"invoice_id": "in_1", "total": {"amount": 5}}]
    _, other, _ = await api.call("GET", f"/v1/event-types/{refunded}")
    assert (other["group"], other["deprecated"], other["examples"]) == (
        "Refunds", True, [{"id": "re_1"}],
    )  # fmt: skip

    # Again, as JSON, with one change: upserted.
    doc["webhooks"][refunded]["post"]["description"] = "A refund was sent."
    status, again, _ = await api.call("POST", "/v1/event-types/import", json=doc)
    assert status == 200, again
    assert (again["created"], again["updated"], again["unchanged"]) == ([], [refunded], [paid])


async def test_import_refusals(api: Api) -> None:
    for doc, pointer in (
        ({"openapi": "3.0.3", "paths": {}}, "/openapi"),
        ({"openapi": "3.1.0", "info": {}}, "/webhooks"),
    ):
        status, problem, _ = await api.call("POST", "/v1/event-types/import", json=doc)
        assert status == 422 and problem["errors"][0]["pointer"] == pointer, problem
    status, problem, _ = await api.call(
        "POST",
        "/v1/event-types/import",
        data=b"openapi: [unclosed",
        headers={"Content-Type": "application/yaml"},
    )
    assert status == 400, problem
    # A billion laughs: ten aliases deep is 10^9 nodes once expanded.
    laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(9)
    )
    status, problem, _ = await api.call(
        "POST",
        "/v1/event-types/import",
        data=laughs.encode(),
        headers={"Content-Type": "application/yaml"},
    )
    assert status == 422 and problem["type"].endswith("/json-too-many-nodes"), problem


async def test_the_command_line(api: Api, tmp_path: Path) -> None:
    name = fresh("cli.made")
    schema_file = tmp_path / "schema.yaml"
    schema_file.write_text(yaml.safe_dump(SCHEMA))
    made = (
        await cli(
            api, "event-types", "create", name, "--json", "--schema", str(schema_file),
            "--group", "CLI", "--example", '{"invoice_id": "in_1", "amount": 3}',
        )
    ).json()  # fmt: skip
    assert (made["schema"], made["group"], made["examples"]) == (
        SCHEMA, "CLI", [{"invoice_id": "in_1", "amount": 3}],
    )  # fmt: skip
    bad = await cli(api, "event-types", "create", fresh("cli.bad"), "--example", '{"amount": -1}',
                    "--schema", str(schema_file))  # fmt: skip
    assert bad.code == 1 and "/examples/0" in bad.err, bad

    shown = await cli(api, "event-types", "show", name)
    assert shown.code == 0 and '"invoice_id"' in shown.out and "CLI" in shown.out, shown
    listed = await cli(api, "event-types", "list", "--group", "CLI")
    assert listed.code == 0 and name in listed.out, listed

    updated = (
        await cli(api, "event-types", "update", name, "--json", "--no-schema", "--deprecated")
    ).json()
    assert (updated["schema"], updated["deprecated"]) == (None, True)
    assert (await cli(api, "event-types", "archive", name)).code == 0
    listed = (await cli(api, "event-types", "list", "--group", "CLI", "--json")).json()
    assert name not in {t["name"] for t in listed["data"]}
    listed = (
        await cli(api, "event-types", "list", "--group", "CLI", "--archived", "--json")
    ).json()
    assert name in {t["name"] for t in listed["data"]}
    restored = (await cli(api, "event-types", "update", name, "--restore", "--json")).json()
    assert restored["archived"] is False

    paid, refunded, broken = fresh("cli.paid"), fresh("cli.refunded"), fresh("cli.broken")
    document = tmp_path / "openapi.yaml"
    document.write_text(yaml.safe_dump(openapi_doc(paid, refunded, broken)))
    imported = await cli(api, "event-types", "import", str(document))
    assert imported.code == 0, imported
    assert paid in imported.out and f"not imported: {broken}" in imported.out
    again = (await cli(api, "event-types", "import", str(document), "--json")).json()
    assert sorted(again["unchanged"]) == sorted([paid, refunded])
    missing = await cli(api, "event-types", "import", str(tmp_path / "none.yaml"))
    assert missing.code == 2 and "cannot read" in missing.err


async def test_writes_are_atomic_and_each_bumps_the_version(stack: Stack, api: Api) -> None:
    client = Redis.from_url(stack.valkey.url, decode_responses=True)
    try:
        name = fresh("raced")
        answers = await asyncio.gather(
            *(api.call("POST", "/v1/event-types", json={"name": name, "description": str(i)})
              for i in range(8))
        )  # fmt: skip
        assert sorted(status for status, _, _ in answers) == [201] + [409] * 7
        version = int(await client.get(keys.EVENT_TYPES_VERSION) or 0)
        # Two writers of different fields at once: neither change is lost.
        await asyncio.gather(
            api.call("PATCH", f"/v1/event-types/{name}", json={"group": "G"}),
            api.call("PATCH", f"/v1/event-types/{name}", json={"deprecated": True}),
        )
        _, got, _ = await api.call("GET", f"/v1/event-types/{name}")
        assert (got["group"], got["deprecated"]) == ("G", True)
        assert int(await client.get(keys.EVENT_TYPES_VERSION) or 0) == version + 2
        # What changes nothing writes nothing: the API processes keep their schemas.
        status, _, _ = await api.call("PATCH", f"/v1/event-types/{name}", json={"group": "G"})
        assert status == 200
        assert int(await client.get(keys.EVENT_TYPES_VERSION) or 0) == version + 2
        assert await client.zscore(keys.EVENT_TYPES, name) == 0
        assert keys.tag_of(keys.event_type(name)) == "types"
    finally:
        await client.aclose()
