"""JSON shape limits: nesting depth and the number of object keys, over the whole body."""

from __future__ import annotations

from typing import Any

import pytest

from webhook_service.api.body import check_shape
from webhook_service.api.problems import ProblemError


def nested(depth: int) -> Any:
    """``depth`` levels: objects and arrays alternating, innermost an empty object."""
    value: Any = {}
    for level in range(depth - 1):
        value = [value] if level % 2 else {"k": value}
    return value


@pytest.mark.parametrize("depth", [1, 2, 31, 32])
def test_up_to_the_limit_passes(depth: int) -> None:
    check_shape(nested(depth), max_depth=32, max_keys=100)


def test_one_level_more_is_refused_with_a_pointer_to_it() -> None:
    with pytest.raises(ProblemError) as caught:
        check_shape({"data": {"a": [{"b": {}}]}}, max_depth=4, max_keys=100)
    problem = caught.value
    assert (problem.status, problem.kind) == (422, "json-too-deep")
    assert problem.errors == [{"pointer": "/data/a/0/b", "detail": "deeper than 4 levels"}]


def test_scalars_add_no_depth() -> None:
    check_shape({"a": [1, "x", None, True, 2.5]}, max_depth=2, max_keys=10)


def test_depth_beyond_pythons_stack_is_measured_not_recursed() -> None:
    with pytest.raises(ProblemError, match="more than 32 levels"):
        check_shape(nested(50_000), max_depth=32, max_keys=100)


def test_keys_are_counted_over_every_object() -> None:
    body = {"a": {str(n): n for n in range(5)}, "b": [{"x": 1}, {"y": 2}]}  # 2 + 5 + 2 keys
    check_shape(body, max_depth=8, max_keys=9)
    with pytest.raises(ProblemError) as caught:
        check_shape(body, max_depth=8, max_keys=8)
    assert (caught.value.status, caught.value.kind) == (422, "json-too-many-keys")


def test_array_items_are_not_keys() -> None:
    check_shape({"list": list(range(1000))}, max_depth=2, max_keys=1)
