"""JSON Schema (2020-12) for event types: checking a schema given to the catalog, compiling
it, and what an event's ``data`` breaks of it, each with a JSON Pointer.

The validator is jsonschema-rs (Rust, compiled once per schema): bench/bench_validation.py
compares it with fastjsonschema (no 2020-12: drafts 4, 6 and 7 only) and jsonschema (pure
Python, 2020-12, many times slower); docs/benchmarks.md has the figures. A schema may
``$ref`` only within itself: a remote reference would have the API fetch a URL a caller
chose, so every retrieval is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema_rs

from webhook_service.api.problems import pointer

DIALECT = "https://json-schema.org/draft/2020-12/schema"
# An event breaking many rules is told the first few: enough to fix it, a bounded answer.
MAX_VIOLATIONS = 10
# A schema's ``pattern`` runs on the producer's data at every ingest. jsonschema-rs's
# fancy-regex hands a pattern without lookaround or backreferences to a linear-time engine;
# one with them backtracks, and this bounds it (the library's own bound is a million steps,
# tens of milliseconds of the API's loop): past it the value counts as not matching.
PATTERN_OPTIONS = jsonschema_rs.FancyRegexOptions(backtrack_limit=100_000)


class SchemaProblem(ValueError):
    """A schema the catalog cannot take; the message says why."""


@dataclass(frozen=True)
class Violation:
    pointer: str  # RFC 6901, into the event's ``data`` ("" for the whole of it)
    message: str


def _no_remote(uri: str) -> Any:
    raise SchemaProblem(f"only references within the schema are allowed, not {uri}")


def _first_line(exc: Exception) -> str:
    # jsonschema-rs appends where it failed over several lines, quoting the schema.
    return str(exc).split("\n", 1)[0].strip()


@dataclass(frozen=True)
class CompiledSchema:
    validator: jsonschema_rs.Draft202012Validator

    def violations(self, data: Any, limit: int = MAX_VIOLATIONS) -> list[Violation]:
        found: list[Violation] = []
        if self.validator.is_valid(data):  # the common case, without building errors
            return found
        for error in self.validator.iter_errors(data):
            found.append(Violation(pointer(error.instance_path), error.message))
            if len(found) >= limit:
                break
        return found


def compile_schema(schema: Any) -> CompiledSchema:
    """The schema checked against the 2020-12 meta-schema and compiled, or SchemaProblem."""
    if not isinstance(schema, dict):
        raise SchemaProblem("a schema is a JSON object")
    declared = schema.get("$schema", DIALECT)
    if declared not in (DIALECT, DIALECT + "#"):
        raise SchemaProblem(f"only JSON Schema 2020-12 is taken ($schema {DIALECT})")
    try:
        jsonschema_rs.meta.validate(schema)
    except jsonschema_rs.ValidationError as exc:
        raise SchemaProblem(f"{pointer(exc.instance_path) or '/'}: {exc.message}") from None
    except Exception as exc:  # a meta-schema the library cannot even apply
        raise SchemaProblem(_first_line(exc)) from None
    try:
        validator = jsonschema_rs.Draft202012Validator(
            schema, validate_formats=False, retriever=_no_remote, pattern_options=PATTERN_OPTIONS
        )
    except Exception as exc:  # unresolvable references, patterns no engine takes, ...
        raise SchemaProblem(_first_line(exc)) from None
    return CompiledSchema(validator)


def example_violations(
    compiled: CompiledSchema | None, examples: Sequence[Any]
) -> list[tuple[int, Violation]]:
    """What each example breaks, by its index: an example must be an object (as ``data``
    is) and, where there is a schema, valid against it."""
    found: list[tuple[int, Violation]] = []
    for index, example in enumerate(examples):
        if not isinstance(example, dict):
            found.append((index, Violation("", "an example is a JSON object, as data is")))
        elif compiled is not None:
            found.extend((index, v) for v in compiled.violations(example))
    return found
