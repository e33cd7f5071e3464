"""JSON shape limits: nesting depth, object keys and values in all, over the whole body."""

from __future__ import annotations

from typing import Any

import pytest

from webhook_service.api.body import ShapeLimits, check_containers, check_shape
from webhook_service.api.problems import ProblemError


def nested(depth: int) -> Any:
    """``depth`` levels: objects and arrays alternating, innermost an empty object."""
    value: Any = {}
    for level in range(depth - 1):
        value = [value] if level % 2 else {"k": value}
    return value


@pytest.mark.parametrize("depth", [1, 2, 31, 32])
def test_up_to_the_limit_passes(depth: int) -> None:
    check_shape(nested(depth), ShapeLimits(depth=32, keys=100, nodes=1_000_000))


def test_one_level_more_is_refused_with_a_pointer_to_it() -> None:
    with pytest.raises(ProblemError) as caught:
        check_shape({"data": {"a": [{"b": {}}]}}, ShapeLimits(depth=4, keys=100, nodes=1_000_000))
    problem = caught.value
    assert (problem.status, problem.kind) == (422, "json-too-deep")
    assert problem.errors == [{"pointer": "/data/a/0/b", "detail": "deeper than 4 levels"}]


def test_scalars_add_no_depth() -> None:
    check_shape({"a": [1, "x", None, True, 2.5]}, ShapeLimits(depth=2, keys=10, nodes=1_000_000))


def test_depth_beyond_pythons_stack_is_measured_not_recursed() -> None:
    with pytest.raises(ProblemError, match="more than 32 levels"):
        check_shape(nested(50_000), ShapeLimits(depth=32, keys=100, nodes=1_000_000))


def test_keys_are_counted_over_every_object() -> None:
    body = {"a": {str(n): n for n in range(5)}, "b": [{"x": 1}, {"y": 2}]}  # 2 + 5 + 2 keys
    check_shape(body, ShapeLimits(depth=8, keys=9, nodes=1_000_000))
    with pytest.raises(ProblemError) as caught:
        check_shape(body, ShapeLimits(depth=8, keys=8, nodes=1_000_000))
    assert (caught.value.status, caught.value.kind) == (422, "json-too-many-keys")


def test_array_items_are_not_keys() -> None:
    check_shape({"list": list(range(1000))}, ShapeLimits(depth=2, keys=1, nodes=1_000_000))


def test_values_of_every_kind_are_counted() -> None:
    body = {"a": [1, 2, {"b": None}], "c": "x"}  # root, a, 1, 2, {b}, None, c: 7 values
    check_shape(body, ShapeLimits(depth=8, keys=100, nodes=7))
    with pytest.raises(ProblemError) as caught:
        check_shape(body, ShapeLimits(depth=8, keys=100, nodes=6))
    assert (caught.value.status, caught.value.kind) == (422, "json-too-many-nodes")


def test_many_empty_objects_are_refused() -> None:
    # The reported attack: 80 000 empty objects in one array (240 KB of "{},"): no key, two
    # levels, so only the count of values refuses it.
    hostile = {"type": "a.b", "data": {"items": [{} for _ in range(80_000)]}}
    with pytest.raises(ProblemError) as caught:
        check_shape(hostile, ShapeLimits(depth=32, keys=10_000, nodes=20_000))
    assert (caught.value.status, caught.value.kind) == (422, "json-too-many-nodes")


@pytest.mark.parametrize("nodes", [1, 2, 3])
def test_a_scalar_body_is_one_value(nodes: int) -> None:
    check_shape("x", ShapeLimits(depth=1, keys=0 + 1, nodes=nodes))


LIMITS = ShapeLimits(depth=32, keys=10_000, nodes=100)


def test_a_body_of_more_containers_than_values_allowed_is_refused_before_parsing() -> None:
    raw = b'{"data": [' + b",".join([b"{}"] * 100) + b"]}"  # 102 containers
    with pytest.raises(ProblemError) as caught:
        check_containers(raw, LIMITS)
    assert caught.value.kind == "json-too-many-nodes"


@pytest.mark.parametrize(
    "raw",
    [
        b'{"s": "' + b"{[" * 200 + b'"}',  # brackets in a string are text
        b'{"s": "\\\\", "t": "' + b"[" * 200 + b'"}',  # an escaped backslash ends no string
        b'{"s": "\\"' + b"{" * 200 + b'"}',  # nor does an escaped quote
        b'["' + b'", "'.join([b"{"] * 60) + b'"]',  # many strings, each a bracket
    ],
)
def test_brackets_inside_strings_are_not_counted(raw: bytes) -> None:
    check_containers(raw, LIMITS)
