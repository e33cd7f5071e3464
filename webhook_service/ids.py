"""Time-sortable ids: a prefix, 48 bits of milliseconds and 80 random bits in Crockford base32.

Sorting ids sorts by creation time, so history pages by id without scanning, and a time
range becomes an id range (``id_bound``). Within one millisecond a process's ids of one
prefix count up from the first one's random part (as monotonic ULIDs do), so the events one
producer sends through one API process list in the order they were accepted even when they
share a millisecond; across processes the order within a millisecond is the random part's.
"""

from __future__ import annotations

import secrets
import threading
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_BODY_LEN = 26  # 10 chars of time + 16 of randomness
_RANDOM_MAX = (1 << 80) - 1
# prefix -> the millisecond and random part of the last id made with it in this process.
_last: dict[str, tuple[int, int]] = {}
_last_lock = threading.Lock()  # the scheduler's shipper and a worker's loop are threads


def _encode(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def new_id(prefix: str, now_ms: int | None = None) -> str:
    ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    with _last_lock:
        last_ms, last_random = _last.get(prefix, (-1, 0))
        if ms == last_ms and last_random < _RANDOM_MAX:
            random = last_random + 1
        else:
            random = secrets.randbits(80)
        _last[prefix] = (ms, random)
    return f"{prefix}_{_encode(ms, 10)}{_encode(random, 16)}"


def id_bound(prefix: str, ms: int, *, upper: bool) -> str:
    """The smallest (or largest) id a given millisecond can produce."""
    return f"{prefix}_{_encode(ms, 10)}{(_ALPHABET[-1] if upper else _ALPHABET[0]) * 16}"


def id_time_ms(identifier: str) -> int:
    body = identifier.partition("_")[2][:10]
    value = 0
    for char in body:
        value = value * 32 + _ALPHABET.index(char)
    return value


def seq_tail(seq: int) -> str:
    """An endpoint's sequence number (endpoint_save.lua gives one to every new endpoint) as
    its delivery ids end with it: the count of its base32 digits, then the digits. The count
    first makes text order number order, and never starts with 0, unlike an endpoint id's
    body (its time), so a tail of either form is told from the other and sorts after it."""
    if seq < 1:
        raise ValueError("endpoint sequence numbers start at 1")
    digits = ""
    while seq:
        digits = _ALPHABET[seq & 31] + digits
        seq >>= 5
    return _ALPHABET[len(digits)] + digits


def delivery_id(event_id: str, endpoint_id: str, seq: int | None = None) -> str:
    """Deterministic from (event, endpoint) so a replayed fan-out finds the same record:
    the event's id body, then the endpoint's sequence number (``seq_tail``), or the
    endpoint's id body for an endpoint made before they had one (``seq`` None). Sorting
    delivery ids sorts by event time first. common.lua create_delivery spells it too."""
    tail = endpoint_id.partition("_")[2] if seq is None else seq_tail(seq)
    return f"dlv_{event_id.partition('_')[2]}{tail}"


def delivery_event(delivery_id: str) -> str:
    """The event a delivery's id starts with: its event, unless it is a replay's (whose
    hash names its event; common.lua delivery_event)."""
    return "msg_" + delivery_id[4 : 4 + _BODY_LEN]


def delivery_tail(delivery_id: str) -> str:
    """What a delivery id ends with, after its event's (or its replay's) 26 characters: an
    endpoint's id body, or a ``seq_tail`` (which the endpoints:seqs hash maps to it)."""
    return delivery_id[4 + _BODY_LEN :]


def tail_endpoint(tail: str) -> str | None:
    """The endpoint a delivery id's tail names by itself (an id body), else None."""
    return "ep_" + tail if len(tail) == _BODY_LEN else None


def event_deliveries(event_id: str, dlvs: str | None) -> list[str]:
    """The delivery ids an event's ``dlvs`` field lists. An entry names a delivery whose id
    starts with the event's body by the rest of the id only (its tail); a replay's delivery
    by its whole id, as did every entry written before (common.lua event_deliveries)."""
    head = "dlv_" + event_id.partition("_")[2]
    return [d if d.startswith("dlv_") else head + d for d in (dlvs or "").split(",") if d]


def looks_like(identifier: str, prefix: str) -> bool:
    """An id of this prefix: a body of 26 characters, or of 52 (a delivery's: its event's
    and its endpoint's bodies), or, for a delivery, 26 and a ``seq_tail``."""
    body = identifier[len(prefix) + 1 :]
    if not identifier.startswith(prefix + "_") or not all(char in _ALPHABET for char in body):
        return False
    tail = body[_BODY_LEN:]
    if len(body) in (_BODY_LEN, 2 * _BODY_LEN):
        return True
    return (
        prefix == "dlv"
        and len(tail) >= 2
        and len(tail) == 1 + _ALPHABET.index(tail[0])
        and tail[1] != "0"
    )
