"""Payload filters on endpoints: which of its events an endpoint receives, by their content.

A filter is a JSON object, in the spirit of Convoy's and Outpost's (Mongo-like operators),
our own in its details. Each key is a **path** or a **logical operator**:

- a path is ``type``, ``channels``, ``data`` or ``data.`` followed by dot-separated keys into
  the event's data (``data.customer.country``); a key that holds a dot cannot be named.
  Its value is either a literal (``{"type": "invoice.paid"}``: ``$eq``) or an object of
  operators that must all hold (``{"data.amount": {"$gte": 100, "$lt": 1000}}``): ``$eq``
  ``$neq`` (any JSON value), ``$gt`` ``$gte`` ``$lt`` ``$lte`` (a number or a string),
  ``$in`` ``$nin`` (a non-empty list of scalars), ``$exists`` (a boolean) and ``$regex``
  (a string, RE2 syntax, matched anywhere unless anchored: RE2 runs in linear time, so no
  pattern can make ingest backtrack). A plain object as a path's value is refused: compare a
  whole object with ``{"$eq": {...}}`` or name the inner key with a dotted path.
- ``$and`` and ``$or`` take a non-empty list of filters, ``$not`` one filter. Several keys
  in one object must all hold.

Semantics, stated once (tests/unit/test_filters.py checks them against a reference):

- Types never mix: numbers compare with numbers only (``1`` equals ``1.0``; a boolean is
  no number), strings with strings (by code point); a comparison across types is false,
  so ``{"$gt": 5}`` is false on ``"7"`` and ``$eq`` of ``1`` is false on ``true``.
- A missing path (a key absent, or a step into something that is no object) fails every
  operator but ``$exists: false``, ``$neq`` and ``$nin``, which hold: the value is not
  equal to the operand, because there is none. ``null`` is a value: ``{"$eq": null}``
  matches an explicit null only, and ``$exists: true`` holds on it.
- Arrays: an operator on an array value holds when it holds on the array itself or on any
  of its elements (one level), so ``{"channels": "eu"}`` and ``{"data.tags": {"$in":
  ["a", "b"]}}`` ask for any element; ``$neq`` and ``$nin`` are their negations (no
  element equal, none in the list).
- ``channels`` is the event's list of channels (empty when it has none); ``type`` its type.

Bounds: a filter is at most MAX_FILTER_BYTES of compact JSON and nests logical operators
at most MAX_DEPTH deep, so that evaluating every filtered endpoint at ingest stays a
bounded, small cost (bench/bench_filters.py). An invalid filter raises FilterInvalid with
the JSON pointer of the part at fault.

``Filter.explain`` says which clause decided, as a pointer into the filter: a false ``$and``
(or a filter's several keys) by its first false clause, a true ``$or`` by its first true
one; a true ``$and`` and a false ``$or`` by themselves (every clause counted)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import orjson
import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

MAX_FILTER_BYTES = 4096
MAX_DEPTH = 8
MAX_PATH_CHARS = 256
# RE2's memory for one compiled pattern: far above what 4 KiB of pattern needs, and a
# bound on what a hostile one may take.
_RE2_MAX_MEM = 1 << 20


class Op(StrEnum):
    EQ = "$eq"
    NEQ = "$neq"
    GT = "$gt"
    GTE = "$gte"
    LT = "$lt"
    LTE = "$lte"
    IN = "$in"
    NIN = "$nin"
    EXISTS = "$exists"
    REGEX = "$regex"


class Logic(StrEnum):
    AND = "$and"
    OR = "$or"
    NOT = "$not"


_ORDERED = frozenset({Op.GT, Op.GTE, Op.LT, Op.LTE})
# The negations: they hold where their positive counterpart does not, a missing path too.
_NEGATED = {Op.NEQ: Op.EQ, Op.NIN: Op.IN}
_ROOTS = frozenset({"type", "channels", "data"})


class FilterInvalid(ValueError):
    """A filter refused: ``pointer`` (RFC 6901) names its part at fault, '' the whole."""

    def __init__(self, pointer: str, detail: str) -> None:
        super().__init__(f"{pointer or '/'}: {detail}")
        self.pointer = pointer
        self.detail = detail


class _Missing:
    """The value at a path that leads nowhere."""


MISSING = _Missing()


@dataclass(frozen=True)
class FilterEvent:
    """What a filter looks at: an event as its producer posted it."""

    type: str
    data: Any
    channels: Sequence[str] = ()


@dataclass(frozen=True)
class Verdict:
    matches: bool
    decided_by: str  # the JSON pointer, into the filter, of the clause that decided
    clause: str  # that clause in words


@dataclass(frozen=True)
class Compare:
    pointer: str
    path: tuple[str, ...]
    op: Op
    operand: Any
    pattern: Any = None  # $regex: the compiled RE2 pattern

    def verdict(self, event: FilterEvent) -> Verdict:
        value = _lookup(event, self.path)
        return Verdict(self._holds(value), self.pointer, self.text())

    def text(self) -> str:
        return f"{'.'.join(self.path)} {self.op} {orjson.dumps(self.operand).decode()}"

    def _holds(self, value: Any) -> bool:
        if self.op is Op.EXISTS:
            return (value is not MISSING) is self.operand
        positive = _NEGATED.get(self.op)
        if positive is not None:
            return not _positive(positive, self.operand, self.pattern, value)
        return _positive(self.op, self.operand, self.pattern, value)


@dataclass(frozen=True)
class AllOf:
    pointer: str
    clauses: tuple[Clause, ...]

    def verdict(self, event: FilterEvent) -> Verdict:
        for clause in self.clauses:
            found = clause.verdict(event)
            if not found.matches:
                return found
        return Verdict(True, self.pointer, f"all {len(self.clauses)} clauses held")


@dataclass(frozen=True)
class AnyOf:
    pointer: str
    clauses: tuple[Clause, ...]

    def verdict(self, event: FilterEvent) -> Verdict:
        for clause in self.clauses:
            found = clause.verdict(event)
            if found.matches:
                return found
        return Verdict(False, self.pointer, f"none of {len(self.clauses)} clauses held")


@dataclass(frozen=True)
class Not:
    pointer: str
    clause: Clause

    def verdict(self, event: FilterEvent) -> Verdict:
        inner = self.clause.verdict(event)
        held = "held" if inner.matches else "did not hold"
        return Verdict(not inner.matches, inner.decided_by, f"$not: {inner.clause} {held}")


Clause = Compare | AllOf | AnyOf | Not


@dataclass(frozen=True)
class Filter:
    root: Clause
    text: str  # the filter as stored: compact JSON, keys in the order given

    @classmethod
    def parse(cls, document: Any) -> Filter:
        """The filter ``document`` (parsed JSON) describes, or FilterInvalid."""
        if not isinstance(document, dict):
            raise FilterInvalid("", "a filter is a JSON object")
        text = orjson.dumps(document).decode()
        if len(text.encode()) > MAX_FILTER_BYTES:
            raise FilterInvalid(
                "", f"the filter is {len(text.encode())} bytes, over {MAX_FILTER_BYTES}"
            )
        return cls(_clauses("", document, 0), text)

    @classmethod
    def loads(cls, text: str) -> Filter:
        """A stored filter (Filter.text) read back."""
        return cls.parse(orjson.loads(text))

    def matches(self, event: FilterEvent) -> bool:
        return self.root.verdict(event).matches

    def explain(self, event: FilterEvent) -> Verdict:
        return self.root.verdict(event)


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _clauses(pointer: str, document: Mapping[str, Any], depth: int) -> Clause:
    """An object of paths and logical operators: each must hold."""
    if not document:
        raise FilterInvalid(pointer, "an empty filter; send null to have none")
    parts = [_key(f"{pointer}/{_escape(k)}", k, v, depth) for k, v in document.items()]
    return parts[0] if len(parts) == 1 else AllOf(pointer, tuple(parts))


def _key(pointer: str, key: str, value: Any, depth: int) -> Clause:
    if key in Logic.__members__.values():
        return _logic(pointer, Logic(key), value, depth + 1)
    if key.startswith("$"):
        raise FilterInvalid(
            pointer,
            f"{key} is no logical operator ($and, $or, $not); a comparison goes under a "
            'path: {"data.amount": {"$gte": 100}}',
        )
    path = _path(pointer, key)
    if not isinstance(value, dict):
        return Compare(pointer, path, Op.EQ, value)
    if not value:
        raise FilterInvalid(pointer, "no operator given")
    compares = [_compare(f"{pointer}/{_escape(op)}", path, op, v) for op, v in value.items()]
    return compares[0] if len(compares) == 1 else AllOf(pointer, tuple(compares))


def _logic(pointer: str, logic: Logic, value: Any, depth: int) -> Clause:
    if depth > MAX_DEPTH:
        raise FilterInvalid(pointer, f"logical operators nest at most {MAX_DEPTH} deep")
    if logic is Logic.NOT:
        if not isinstance(value, dict):
            raise FilterInvalid(pointer, "$not takes a filter object")
        return Not(pointer, _clauses(pointer, value, depth))
    if not isinstance(value, list) or not value:
        raise FilterInvalid(pointer, f"{logic} takes a non-empty list of filter objects")
    clauses = []
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise FilterInvalid(f"{pointer}/{i}", "a filter object")
        clauses.append(_clauses(f"{pointer}/{i}", item, depth))
    return (AllOf if logic is Logic.AND else AnyOf)(pointer, tuple(clauses))


def _path(pointer: str, key: str) -> tuple[str, ...]:
    segments = tuple(key.split("."))
    if len(key) > MAX_PATH_CHARS:
        raise FilterInvalid(pointer, f"a path is at most {MAX_PATH_CHARS} characters")
    if segments[0] not in _ROOTS or (segments[0] != "data" and len(segments) > 1):
        raise FilterInvalid(
            pointer, "a path is type, channels, data or data.<key>[.<key>...] (dotted)"
        )
    if not all(segments):
        raise FilterInvalid(pointer, "a path has no empty segment")
    return segments


def _compare(pointer: str, path: tuple[str, ...], name: str, operand: Any) -> Compare:
    if name not in Op.__members__.values():
        raise FilterInvalid(
            pointer,
            f"{name} is no comparison operator; a plain object cannot be matched: use "
            '{"$eq": {...}} for a whole object, or a dotted path into it',
        )
    op = Op(name)
    if op in _ORDERED and not (_is_number(operand) or isinstance(operand, str)):
        raise FilterInvalid(pointer, f"{op} takes a number or a string")
    if op in (Op.IN, Op.NIN) and not (
        isinstance(operand, list) and operand and all(_is_scalar(x) for x in operand)
    ):
        raise FilterInvalid(pointer, f"{op} takes a non-empty list of scalars")
    if op is Op.EXISTS and not isinstance(operand, bool):
        raise FilterInvalid(pointer, "$exists takes true or false")
    if op is Op.REGEX:
        return Compare(pointer, path, op, operand, _regex(pointer, operand))
    return Compare(pointer, path, op, operand)


def _regex(pointer: str, pattern: Any) -> Any:
    if not isinstance(pattern, str):
        raise FilterInvalid(pointer, "$regex takes a string (RE2 syntax)")
    options = re2.Options()
    options.log_errors = False
    options.max_mem = _RE2_MAX_MEM
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else b""
        text = reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)
        raise FilterInvalid(pointer, f"not an RE2 pattern: {text}") from None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _lookup(event: FilterEvent, path: tuple[str, ...]) -> Any:
    head, *rest = path
    if head == "type":
        return event.type
    if head == "channels":
        return list(event.channels)
    value = event.data
    for key in rest:
        if not isinstance(value, dict) or key not in value:
            return MISSING
        value = value[key]
    return value


def _equal(a: Any, b: Any) -> bool:
    """JSON equality: a boolean equals only a boolean (Python has True == 1)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    if _is_number(a) or _is_number(b):
        return _is_number(a) and _is_number(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and bool(a == b)


def _ordered(op: Op, value: Any, operand: Any) -> bool:
    if not (
        (_is_number(value) and _is_number(operand))
        or (isinstance(value, str) and isinstance(operand, str))
    ):
        return False
    if op is Op.GT:
        return bool(value > operand)
    if op is Op.GTE:
        return bool(value >= operand)
    if op is Op.LT:
        return bool(value < operand)
    return bool(value <= operand)


def _one(op: Op, operand: Any, pattern: Any, value: Any) -> bool:
    if op is Op.EQ:
        return _equal(value, operand)
    if op is Op.IN:
        return any(_equal(value, x) for x in operand)
    if op is Op.REGEX:
        return isinstance(value, str) and pattern.search(value) is not None
    return _ordered(op, value, operand)


def _positive(op: Op, operand: Any, pattern: Any, value: Any) -> bool:
    """A positive operator on a value: on an array, on it or any of its elements."""
    if value is MISSING:
        return False
    if _one(op, operand, pattern, value):
        return True
    return isinstance(value, list) and any(_one(op, operand, pattern, e) for e in value)
