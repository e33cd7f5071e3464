"""Payload filters (webhook_service/filters.py): parsing and its refusals with their
pointers, the stated semantics on examples, and a property test against a small reference
evaluator written here from the module's docstring alone."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook_service.filters import (
    MAX_DEPTH,
    MAX_FILTER_BYTES,
    Filter,
    FilterEvent,
    FilterInvalid,
)

INVOICE = FilterEvent(
    "invoice.paid",
    {"amount": 250, "currency": "EUR", "tags": ["vip", "eu"], "customer": {"country": "DE"},
     "note": None},
    ("eu", "billing"),
)  # fmt: skip


def matches(document: Any, event: FilterEvent = INVOICE) -> bool:
    return Filter.parse(document).matches(event)


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ({"type": "invoice.paid"}, True),
        ({"type": {"$neq": "invoice.paid"}}, False),
        ({"data.amount": {"$gte": 100}}, True),
        ({"data.amount": {"$gte": 100, "$lt": 200}}, False),
        ({"data.amount": {"$gt": "100"}}, False),  # a number never compares with a string
        ({"data.amount": 250.0}, True),  # 250 equals 250.0
        ({"data.currency": {"$gt": "ABC"}}, True),
        ({"data.customer.country": {"$in": ["DE", "FR"]}}, True),
        ({"data.customer.country": {"$nin": ["DE", "FR"]}}, False),
        ({"data.tags": "vip"}, True),  # any element
        ({"data.tags": {"$in": ["x", "eu"]}}, True),
        ({"data.tags": {"$nin": ["x", "eu"]}}, False),
        ({"data.tags": {"$neq": "vip"}}, False),  # no element may equal it
        ({"data.tags": {"$eq": ["vip", "eu"]}}, True),  # the whole array
        ({"channels": "billing"}, True),
        ({"channels": {"$in": ["us"]}}, False),
        ({"data.note": None}, True),
        ({"data.note": {"$exists": True}}, True),
        ({"data.missing": None}, False),  # null is a value, missing is not
        ({"data.missing": {"$exists": False}}, True),
        ({"data.missing": {"$neq": 1}}, True),
        ({"data.missing": {"$nin": [1]}}, True),
        ({"data.missing": {"$lt": 1}}, False),
        ({"data.amount.deeper": {"$exists": True}}, False),  # a step into a number
        ({"data.customer": {"$eq": {"country": "DE"}}}, True),
        ({"data": {"$exists": True}}, True),
        ({"data.amount": {"$eq": True}}, False),
        ({"$or": [{"data.amount": {"$lt": 10}}, {"data.currency": "EUR"}]}, True),
        ({"$and": [{"data.amount": {"$lt": 10}}, {"data.currency": "EUR"}]}, False),
        ({"$not": {"data.currency": "EUR"}}, False),
        ({"type": "invoice.paid", "data.currency": "USD"}, False),
        ({"data.currency": {"$regex": "^E.R$"}}, True),
        ({"data.customer.country": {"$regex": "e"}}, False),
        ({"data.amount": {"$regex": "2"}}, False),  # on strings only
    ],
)
def test_semantics(document: Any, expected: bool) -> None:
    assert matches(document) is expected


def test_true_and_false_are_not_numbers() -> None:
    event = FilterEvent("t", {"flag": True, "n": 1})
    assert not matches({"data.flag": 1}, event)
    assert not matches({"data.n": True}, event)
    assert matches({"data.flag": True}, event)
    assert not matches({"data.flag": {"$gt": 0}}, event)


@pytest.mark.parametrize(
    ("document", "pointer"),
    [
        ([], ""),
        ({}, ""),
        ({"$gt": 1}, "/$gt"),
        ({"amount": 1}, "/amount"),
        ({"data..x": 1}, "/data..x"),
        ({"type.x": 1}, "/type.x"),
        ({"data.x": {}}, "/data.x"),
        ({"data.x": {"a": 1}}, "/data.x/a"),
        ({"data.x": {"$gte": True}}, "/data.x/$gte"),
        ({"data.x": {"$gte": [1]}}, "/data.x/$gte"),
        ({"data.x": {"$in": []}}, "/data.x/$in"),
        ({"data.x": {"$in": [{"a": 1}]}}, "/data.x/$in"),
        ({"data.x": {"$exists": 1}}, "/data.x/$exists"),
        ({"data.x": {"$regex": "(a)\\1"}}, "/data.x/$regex"),
        ({"data.x": {"$regex": 5}}, "/data.x/$regex"),
        ({"$or": []}, "/$or"),
        ({"$or": [{"type": "a"}, 3]}, "/$or/1"),
        ({"$and": [{"type": "a"}, {"data.a/b~": {"$foo": 1}}]}, "/$and/1/data.a~1b~0/$foo"),
        ({"$not": [{"type": "a"}]}, "/$not"),
        ({"$not": {}}, "/$not"),
        ({"data." + "x" * 300: 1}, "/data." + "x" * 300),
    ],
)
def test_refusals_point_at_the_part(document: Any, pointer: str) -> None:
    with pytest.raises(FilterInvalid) as caught:
        Filter.parse(document)
    assert caught.value.pointer == pointer


def test_size_bound() -> None:
    values = list(range(MAX_FILTER_BYTES // 2))
    with pytest.raises(FilterInvalid, match="bytes") as caught:
        Filter.parse({"data.x": {"$in": values}})
    assert caught.value.pointer == ""


def test_depth_bound() -> None:
    inner: dict[str, Any] = {"type": "a"}
    for _ in range(MAX_DEPTH):
        inner = {"$not": inner}
    assert Filter.parse(inner).matches(FilterEvent("a", {})) is (MAX_DEPTH % 2 == 0)
    with pytest.raises(FilterInvalid, match="nest") as caught:
        Filter.parse({"$and": [inner]})
    assert caught.value.pointer == "/$and/0" + "/$not" * MAX_DEPTH


def test_stored_text_reads_back() -> None:
    document = {"$or": [{"data.amount": {"$gte": 100}}, {"type": "a"}]}
    parsed = Filter.parse(document)
    assert Filter.loads(parsed.text) == parsed


def test_explain_names_the_deciding_clause() -> None:
    document: dict[str, Any] = {
        "type": "invoice.paid",
        "$or": [{"data.amount": {"$lt": 10}}, {"data.amount": {"$gte": 1000}}],
    }
    verdict = Filter.parse(document).explain(INVOICE)
    assert not verdict.matches
    assert verdict.decided_by == "/$or"
    assert verdict.clause == "none of 2 clauses held"
    document["$or"][1] = {"data.tags": {"$in": ["vip"]}}
    verdict = Filter.parse(document).explain(INVOICE)
    assert verdict.matches
    assert verdict.decided_by == ""
    verdict = Filter.parse({"$or": document["$or"]}).explain(INVOICE)
    assert (verdict.decided_by, verdict.clause) == ("/$or/1/data.tags/$in", 'data.tags $in ["vip"]')
    verdict = Filter.parse({"$not": {"data.currency": "EUR"}}).explain(INVOICE)
    assert (verdict.matches, verdict.decided_by) == (False, "/$not/data.currency")
    assert verdict.clause == '$not: data.currency $eq "EUR" held'


# The reference: the docstring's rules over the raw document, written apart from the module.
ABSENT = object()


def kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if value is None:
        return "null"
    return type(value).__name__


def same(a: Any, b: Any) -> bool:
    if kind(a) != kind(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return set(a) == set(b) and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


def one(op: str, operand: Any, value: Any) -> bool:
    if op == "$eq":
        return same(value, operand)
    if op == "$in":
        return any(same(value, x) for x in operand)
    if op == "$regex":
        return isinstance(value, str) and re.search(operand, value) is not None
    if kind(value) != kind(operand) or kind(value) not in ("number", "str"):
        return False
    return bool(
        {
            "$gt": value > operand,
            "$gte": value >= operand,
            "$lt": value < operand,
            "$lte": value <= operand,
        }[op]
    )


def reference_op(op: str, operand: Any, value: Any) -> bool:
    if op == "$exists":
        return (value is not ABSENT) is operand
    if op == "$neq":
        return not reference_op("$eq", operand, value)
    if op == "$nin":
        return not reference_op("$in", operand, value)
    if value is ABSENT:
        return False
    candidates = [value, *(value if isinstance(value, list) else [])]
    return any(one(op, operand, c) for c in candidates)


def reference_get(path: str, event: FilterEvent) -> Any:
    here: Any = {"type": event.type, "channels": list(event.channels), "data": event.data}
    for part in path.split("."):
        if not isinstance(here, dict) or part not in here:
            return ABSENT
        here = here[part]
    return here


def reference(document: dict[str, Any], event: FilterEvent) -> bool:
    for key, value in document.items():
        if key == "$and":
            held = all(reference(d, event) for d in value)
        elif key == "$or":
            held = any(reference(d, event) for d in value)
        elif key == "$not":
            held = not reference(value, event)
        else:
            ops = value if isinstance(value, dict) else {"$eq": value}
            found = reference_get(key, event)
            held = all(reference_op(op, operand, found) for op, operand in ops.items())
        if not held:
            return False
    return True


# Few distinct values, so that filters and events meet often (true and 1, 1 and 1.0, ...).
scalars = st.sampled_from([None, True, False, 0, 1, 1.0, 2.5, "", "a", "ab"])
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from("abc"), inner, max_size=3)
    ),
    max_leaves=6,
)
events = st.builds(
    FilterEvent,
    st.sampled_from(["a", "b", "a.b"]),
    st.dictionaries(st.sampled_from("abc"), values, min_size=1, max_size=3),
    st.lists(st.sampled_from(["a", "b"]), max_size=2, unique=True).map(tuple),
)
# data.a most often: a filter on a path the event has decides by its value.
paths = st.sampled_from(
    ["type", "channels", "data", "data.a", "data.a", "data.a", "data.b", "data.a.b", "data.a.c"]
)
ordered_operands = st.sampled_from([-1, 0, 1, 1.0, 2, 1.5, "", "a", "b", "ab"])
operators = st.one_of(
    st.tuples(st.sampled_from(["$eq", "$neq"]), values),
    st.tuples(st.sampled_from(["$gt", "$gte", "$lt", "$lte"]), ordered_operands),
    st.tuples(st.sampled_from(["$in", "$nin"]), st.lists(scalars, min_size=1, max_size=3)),
    st.tuples(st.just("$exists"), st.booleans()),
    st.tuples(st.just("$regex"), st.sampled_from(["a", "^b", "a$", "a.b", "^$", "b+"])),
)
conditions = st.one_of(
    scalars,  # a literal: $eq
    st.lists(operators, min_size=1, max_size=3).map(dict),
)
leaves = st.dictionaries(paths, conditions, min_size=1, max_size=2)
filters = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=3).map(lambda items: {"$and": items}),
        st.lists(inner, min_size=1, max_size=3).map(lambda items: {"$or": items}),
        inner.map(lambda item: {"$not": item}),
        st.tuples(leaves, inner).map(lambda pair: {**pair[0], "$or": [pair[1]]}),
    ),
    max_leaves=6,
)


def resolve(document: Any, pointer: str) -> Any:
    here = document
    for token in pointer.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        here = here[int(token)] if isinstance(here, list) else here[token]
    return here


@settings(max_examples=1000, deadline=None)
@given(filters, events)
def test_agrees_with_the_reference(document: dict[str, Any], event: FilterEvent) -> None:
    parsed = Filter.parse(document)
    expected = reference(document, event)
    assert parsed.matches(event) is expected
    verdict = parsed.explain(event)
    assert verdict.matches is expected
    resolve(document, verdict.decided_by)  # a pointer into the filter
