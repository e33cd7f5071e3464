"""The IETF Idempotency-Key rules, as far as they can be decided without Redis.

What happens to a repeated key (replay, 409 while in flight, 422 for another body) is decided
inside the ingest script, atomically with the write; this module validates the header and
computes the body fingerprint that script compares.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from webhook_service.api.problems import ProblemError
from webhook_service.store.events import IngestOutcome

MAX_KEY_LENGTH = 255
HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"


def validate_key(value: str | None) -> str | None:
    if value is None:
        return None
    if not 1 <= len(value) <= MAX_KEY_LENGTH or not value.isascii() or not value.isprintable():
        raise ProblemError(
            400,
            f"{HEADER} must be 1 to {MAX_KEY_LENGTH} printable ASCII characters.",
            kind="invalid-idempotency-key",
        )
    return value


def fingerprint(parsed_body: Any) -> str:
    """Same JSON value, same fingerprint, whatever the key order or white space."""
    return hashlib.sha256(orjson.dumps(parsed_body, option=orjson.OPT_SORT_KEYS)).hexdigest()


def outcome_problem(outcome: IngestOutcome) -> ProblemError | None:
    if outcome is IngestOutcome.MISMATCH:
        return ProblemError(
            422,
            f"This {HEADER} was already used with a different body.",
            kind="idempotency-key-reused",
        )
    if outcome is IngestOutcome.IN_FLIGHT:
        return ProblemError(
            409,
            f"A request with this {HEADER} is still being processed; retry shortly.",
            kind="idempotency-in-flight",
            headers={"Retry-After": "1"},
        )
    return None
