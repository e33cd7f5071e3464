"""Time-sortable ids: a prefix, 48 bits of milliseconds and 80 random bits in Crockford base32.

Sorting ids sorts by creation time, so history pages by id without scanning, and a time
range becomes an id range (``id_bound``).
"""

from __future__ import annotations

import secrets
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_BODY_LEN = 26  # 10 chars of time + 16 of randomness


def _encode(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def new_id(prefix: str, now_ms: int | None = None) -> str:
    ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    return f"{prefix}_{_encode(ms, 10)}{_encode(secrets.randbits(80), 16)}"


def id_bound(prefix: str, ms: int, *, upper: bool) -> str:
    """The smallest (or largest) id a given millisecond can produce."""
    return f"{prefix}_{_encode(ms, 10)}{(_ALPHABET[-1] if upper else _ALPHABET[0]) * 16}"


def id_time_ms(identifier: str) -> int:
    body = identifier.partition("_")[2][:10]
    value = 0
    for char in body:
        value = value * 32 + _ALPHABET.index(char)
    return value


def delivery_id(event_id: str, endpoint_id: str) -> str:
    """Deterministic from (event, endpoint) so a replayed fan-out finds the same record."""
    return f"dlv_{event_id.partition('_')[2]}{endpoint_id.partition('_')[2]}"


def looks_like(identifier: str, prefix: str) -> bool:
    body = identifier[len(prefix) + 1 :]
    return (
        identifier.startswith(prefix + "_")
        and len(body) in (_BODY_LEN, 2 * _BODY_LEN)
        and all(char in _ALPHABET for char in body)
    )
