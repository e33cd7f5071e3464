"""Catalog schemas: what is refused, and the pointers of what an event's data breaks."""

from __future__ import annotations

from typing import Any

import pytest

from webhook_service.event_schemas import (
    MAX_VIOLATIONS,
    SchemaProblem,
    Violation,
    compile_schema,
    example_violations,
)


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        ([], "a JSON object"),
        ({"type": "bogus"}, "/type"),
        ({"$schema": "http://json-schema.org/draft-07/schema#"}, "2020-12"),
        ({"$ref": "https://example.com/remote.json"}, "example.com"),
        ({"$ref": "#/$defs/missing"}, "does not exist"),
        ({"pattern": "(("}, "regex"),
    ],
)
def test_refused_schemas_say_why(schema: Any, says: str) -> None:
    with pytest.raises(SchemaProblem, match=None) as caught:
        compile_schema(schema)
    assert says in str(caught.value)
    assert "\n" not in str(caught.value)


def test_pointers_escape_slashes_and_tildes_and_index_arrays() -> None:
    compiled = compile_schema(
        {
            "properties": {
                "a/b": {"type": "integer"},
                "m~n": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["must"],
        }
    )
    found = compiled.violations({"a/b": "x", "m~n": ["ok", 2]})
    assert sorted(v.pointer for v in found) == ["", "/a~1b", "/m~0n/1"]
    assert all(v.message for v in found)


def test_a_valid_payload_has_no_violation_and_many_are_bounded() -> None:
    compiled = compile_schema({"additionalProperties": {"type": "integer"}})
    assert compiled.violations({"a": 1}) == []
    many = compiled.violations({f"k{i}": "x" for i in range(50)})
    assert len(many) == MAX_VIOLATIONS


def test_examples_must_be_objects_and_match() -> None:
    compiled = compile_schema({"properties": {"n": {"type": "integer"}}})
    assert example_violations(compiled, [{"n": 1}, {"n": "1"}, "text"]) == [
        (1, Violation("/n", '"1" is not of type "integer"')),
        (2, Violation("", "an example is a JSON object, as data is")),
    ]
    assert example_violations(None, [{"anything": True}]) == []


def test_a_backtracking_pattern_is_cut_off_and_counts_as_not_matching() -> None:
    """A backreference backtracks exponentially on a near miss: the bound stops it (without
    it, 30 characters already take the library's million steps) and says so."""
    compiled = compile_schema({"properties": {"s": {"type": "string", "pattern": r"^(a|a)*\1$"}}})
    (violation,) = compiled.violations({"s": "a" * 2000 + "c"})
    assert violation.pointer == "/s" and "backtracking" in violation.message
    assert compiled.violations({"s": "aa"}) == []
