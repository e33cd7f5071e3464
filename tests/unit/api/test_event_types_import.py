"""Reading an OpenAPI 3.1 document's webhooks as catalog types (catalog_import.py)."""

from __future__ import annotations

from typing import Any

import pytest

from webhook_service.catalog_import import read_webhooks, standalone
from webhook_service.event_schemas import compile_schema


def doc(webhooks: dict[str, Any], schemas: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {"title": "t", "version": "1"},
        "webhooks": webhooks,
        "components": {"schemas": schemas or {}, "examples": {"Ex": {"value": {"id": "x"}}}},
    }


def hook(schema: Any, **media: Any) -> dict[str, Any]:
    content = {"application/json": {"schema": schema, **media}}
    return {"post": {"requestBody": {"content": content}}}


def test_references_are_copied_into_defs_transitively_and_recursively() -> None:
    schemas = {
        "Node": {"type": "object", "properties": {"child": {"$ref": "#/components/schemas/Node"},
                 "tag": {"$ref": "#/components/schemas/Tag"}}},
        "Tag": {"type": "string"},
        "Unused": {"type": "integer"},
    }  # fmt: skip
    found = read_webhooks(doc({"tree.grown": hook({"$ref": "#/components/schemas/Node"})}, schemas))
    assert found.errors == []
    (imported,) = found.types
    assert imported.schema == {
        "$ref": "#/$defs/Node",
        "$defs": {
            "Node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/Node"},
                     "tag": {"$ref": "#/$defs/Tag"}}},
            "Tag": {"type": "string"},
        },
    }  # fmt: skip
    compiled = compile_schema(imported.schema)
    assert compiled.violations({"child": {"tag": 5}})[0].pointer == "/child/tag"


def test_the_envelope_gives_its_data_and_each_example_its_data() -> None:
    data = {"$ref": "#/components/schemas/Paid"}
    envelope = {"type": "object", "properties": {"type": {}, "timestamp": {}, "data": data}}
    schemas = {"Envelope": envelope, "Paid": {"type": "object", "required": ["id"]}}
    webhook = hook(
        {"$ref": "#/components/schemas/Envelope"},
        example={"type": "paid", "timestamp": "t", "data": {"id": "in_1"}},
    )
    (imported,) = read_webhooks(doc({"invoice.paid": webhook}, schemas)).types
    assert imported.schema == {"$ref": "#/$defs/Paid", "$defs": {"Paid": schemas["Paid"]}}
    assert imported.examples == [{"id": "in_1"}]


def test_descriptions_groups_examples_and_deprecation() -> None:
    webhooks = {
        "a.one": {"post": {"summary": "S", "tags": ["Billing", "More"],
                           "requestBody": {"content": {"application/json": {
                               "schema": {"type": "object"},
                               "examples": {"x": {"$ref": "#/components/examples/Ex"},
                                            "y": {"value": {"id": "y"}}}}}}}},
        "a.two": {"x-group": "Item group", "post": {
            "description": "D", "summary": "S", "deprecated": True, "x-group": "Op group",
            "requestBody": {"content": {"application/json": {
                "schema": {"type": "object", "examples": [{"from": "schema"}]}}}}}},
        "a.three": {"post": {"summary": "no body"}},
    }  # fmt: skip
    found = read_webhooks(doc(webhooks))
    assert found.errors == []
    one, two, three = found.types
    assert (one.description, one.group, one.examples, one.deprecated) == (
        "S", "Billing", [{"id": "x"}, {"id": "y"}], False,
    )  # fmt: skip
    assert (two.description, two.group, two.examples, two.deprecated) == (
        "D", "Op group", [{"from": "schema"}], True,
    )  # fmt: skip
    assert (three.schema, three.examples, three.group) == (None, [], None)


@pytest.mark.parametrize(
    ("webhook", "detail"),
    [
        (hook({"$ref": "https://example.com/s.json"}), "only references into"),
        (hook({"items": {"$ref": "https://example.com/s.json"}}), "within the document"),
        (hook({"$ref": "#/components/schemas/Missing"}), "leads nowhere"),
        (hook({"$ref": "#/components/parameters/P"}), "only references into"),
        ({"post": {"requestBody": {"content": {"text/plain": {}}}}}, "application/json"),
        ({"summary": "no operation"}, "no operation"),
        ("not an object", "Path Item"),
    ],
)
def test_a_webhook_that_cannot_be_read_is_an_error_naming_it(webhook: Any, detail: str) -> None:
    found = read_webhooks(doc({"bad.one": webhook, "good.one": hook({"type": "object"})}))
    assert [t.name for t in found.types] == ["good.one"]
    (error,) = found.errors
    assert (error.name, error.pointer) == ("bad.one", "/webhooks/bad.one")
    assert detail in error.detail


@pytest.mark.parametrize(
    ("document", "pointer"),
    [
        ([], ""),
        ({"openapi": "3.0.3", "webhooks": {"a": {}}}, "/openapi"),
        ({"openapi": "3.1.0"}, "/webhooks"),
        ({"openapi": "3.1.0", "webhooks": {}}, "/webhooks"),
    ],
)
def test_a_document_that_is_no_31_with_webhooks(document: Any, pointer: str) -> None:
    found = read_webhooks(document)
    assert found.types == [] and [(e.name, e.pointer) for e in found.errors] == [(None, pointer)]


def test_a_name_with_a_slash_is_escaped_in_pointers() -> None:
    found = read_webhooks(doc({"a/b~c": "bad"}))
    assert found.errors[0].pointer == "/webhooks/a~1b~0c"


def test_a_schema_of_its_own_defs_clashing_with_a_component_is_refused() -> None:
    schema = {"$defs": {"Tag": {}}, "properties": {"t": {"$ref": "#/components/schemas/Tag"}}}
    with pytest.raises(ValueError, match="clash"):
        standalone(doc({}, {"Tag": {"type": "string"}}), schema)
