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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
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


# Each clause is compiled, when parsed, to a function of the event (``test``): ingest
# evaluates every filtered endpoint of an application on every event, and closures over
# the operand cost a fraction of walking the tree (bench/bench_filters.py).
Test = Callable[[FilterEvent], bool]


@dataclass(frozen=True)
class Compare:
    pointer: str
    path: tuple[str, ...]
    op: Op
    operand: Any
    pattern: Any = None  # $regex: the compiled RE2 pattern
    test: Test = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "test", _compiled(self))

    def verdict(self, event: FilterEvent) -> Verdict:
        return Verdict(self.test(event), self.pointer, self.text())

    def text(self) -> str:
        return f"{'.'.join(self.path)} {self.op} {orjson.dumps(self.operand).decode()}"


@dataclass(frozen=True)
class AllOf:
    pointer: str
    clauses: tuple[Clause, ...]
    test: Test = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        tests = tuple(c.test for c in self.clauses)

        def every(event: FilterEvent) -> bool:
            # A loop, not all(): a generator per call cost a third more (bench_filters).
            for test in tests:  # noqa: SIM110
                if not test(event):
                    return False
            return True

        object.__setattr__(self, "test", every)

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
    test: Test = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        tests = tuple(c.test for c in self.clauses)

        def some(event: FilterEvent) -> bool:
            for test in tests:  # noqa: SIM110  # as in AllOf
                if test(event):
                    return True
            return False

        object.__setattr__(self, "test", some)

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
    test: Test = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        inner = self.clause.test
        object.__setattr__(self, "test", lambda event: not inner(event))

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
        return self.root.test(event)

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


# Values are as a JSON parser gives them, of exactly these types: a type test by ``is``
# keeps True (a bool, which Python counts as an int) apart from 1.
_NUMBERS = (int, float)


def _getter(path: tuple[str, ...]) -> Callable[[FilterEvent], Any]:
    """The value at ``path`` in an event, or MISSING."""
    head, keys = path[0], path[1:]
    if head == "type":
        return lambda event: event.type
    if head == "channels":
        return lambda event: list(event.channels)

    def value(event: FilterEvent) -> Any:
        here = event.data
        for key in keys:
            if type(here) is not dict:
                return MISSING
            here = here.get(key, MISSING)
        return here

    return value


def _equal(a: Any, b: Any) -> bool:
    """JSON equality: a boolean equals only a boolean, a number only a number."""
    if type(a) in _NUMBERS and type(b) in _NUMBERS:
        return bool(a == b)
    if type(a) is not type(b):
        return False
    if type(a) is list:
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is dict:
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    return bool(a == b)


def _equals(operand: Any) -> Callable[[Any], bool]:
    kind = type(operand)
    if kind in _NUMBERS:
        return lambda v: type(v) in _NUMBERS and v == operand
    if kind is str:
        return lambda v: type(v) is str and v == operand
    if kind is bool or operand is None:
        return lambda v: v is operand
    return lambda v: _equal(v, operand)


def _member(operand: list[Any]) -> Callable[[Any], bool]:
    """$in over scalars: a set per JSON type, so that 1 and true never meet."""
    strings = frozenset(x for x in operand if type(x) is str)
    numbers = frozenset(x for x in operand if type(x) in _NUMBERS)
    flags = tuple(x for x in operand if type(x) is bool)
    null = any(x is None for x in operand)

    def found(v: Any) -> bool:
        kind = type(v)
        if kind is str:
            return v in strings
        if kind in _NUMBERS:
            return v in numbers
        if kind is bool:
            return v in flags
        return v is None and null

    return found


def _ordered(op: Op, operand: Any) -> Callable[[Any], bool]:
    """$gt $gte $lt $lte: a number against numbers only, a string against strings."""
    kinds = _NUMBERS if type(operand) in _NUMBERS else (str,)
    if op is Op.GT:
        return lambda v: type(v) in kinds and v > operand
    if op is Op.GTE:
        return lambda v: type(v) in kinds and v >= operand
    if op is Op.LT:
        return lambda v: type(v) in kinds and v < operand
    return lambda v: type(v) in kinds and v <= operand


def _one(op: Op, operand: Any, pattern: Any) -> Callable[[Any], bool]:
    """A positive operator on one value (no array rule, never MISSING)."""
    if op is Op.EQ:
        return _equals(operand)
    if op is Op.IN:
        return _member(operand)
    if op is Op.REGEX:
        return lambda v: type(v) is str and pattern.search(v) is not None
    return _ordered(op, operand)


def _compiled(compare: Compare) -> Test:
    get = _getter(compare.path)
    if compare.op is Op.EXISTS:
        wanted = compare.operand
        return lambda event: (get(event) is not MISSING) is wanted
    positive = _NEGATED.get(compare.op)
    # A negation answers True where its positive answers False, a missing path too.
    missing = positive is not None
    one = _one(positive or compare.op, compare.operand, compare.pattern)
    # One closure a clause, the lookup of a top-level key of data inlined: the calls are
    # what a clause costs (bench/bench_filters.py).
    key = compare.path[1] if compare.path[0] == "data" and len(compare.path) == 2 else None

    def test(event: FilterEvent) -> bool:
        if key is None:
            v = get(event)
        else:
            v = event.data.get(key, MISSING) if type(event.data) is dict else MISSING
        if v is MISSING:
            return missing
        if one(v):
            return not missing
        if type(v) is list:  # on an array: on it, or on any of its elements
            for e in v:
                if one(e):
                    return not missing
        return missing

    return test
