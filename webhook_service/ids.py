"""Time-sortable ids: a prefix, 48 bits of milliseconds, a bucket mark and random bits, in
Crockford base32.

Sorting ids sorts by creation time, so history pages by id without scanning, and a time
range becomes an id range (``id_bound``). After the 10 characters of time come 2 holding the
id's **mark** (0..1023), then 14 random ones. The store keeps every key of one application
in one bucket, the mark modulo ``keys.BUCKETS`` (a Redis Cluster hash tag: store/keys.py),
so the mark is what tells a caller holding an id where its records are: an application's
endpoints, events, deliveries and replays carry its mark (``mark_of``), and an application
gets one at creation (``uid_mark`` of its uid, so that the step creating it is in the slot
of its uid's mapping, or ``random_mark``).

Within one millisecond a process's ids of one prefix and mark count up from the first one's
random part (as monotonic ULIDs do), so the events one producer sends to one application
through one API process list in the order they were accepted even when they share a
millisecond; across processes (and marks) the order within a millisecond is the rest's.

Ids made before a store had buckets (schema 4 and older) hold no mark: random characters
stand there. ``webhook-service migrate`` put all that such a store held in the bucket of mark
0 and noted when (the store's bucket epoch, ``set_epoch``): an id whose time is older reads
as mark 0, as do ids that are no time-sortable id at all (``app_default``).
"""

from __future__ import annotations

import functools
import hashlib
import secrets
import threading
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_TIME_LEN = 10
_MARK_LEN = 2
_RANDOM_LEN = 14
_BODY_LEN = _TIME_LEN + _MARK_LEN + _RANDOM_LEN  # 26
MARKS = 1 << (5 * _MARK_LEN)  # 1024
_RANDOM_MAX = (1 << (5 * _RANDOM_LEN)) - 1
_AFTER_MARK = 5 * _RANDOM_LEN  # bits after an id's mark
_AFTER_TIME = 5 * (_MARK_LEN + _RANDOM_LEN)  # and after its time
# (prefix, mark) -> the millisecond and random part of the last id made with them here.
_last: dict[tuple[str, int], tuple[int, int]] = {}
_last_lock = threading.Lock()  # the scheduler's shipper and a worker's loop are threads
# Ids older than this (ms) were made before the store had buckets: they read as mark 0.
_epoch_ms = 0


def set_epoch(ms: int) -> None:
    """The store's bucket epoch (store/schema.py reads it at start-up; migrate sets it)."""
    global _epoch_ms  # one store per process, read at its start
    _epoch_ms = ms
    mark_of.cache_clear()  # what it read before the epoch was known


def epoch() -> int:
    return _epoch_ms


# Two characters per 10 bits: every length encoded here is even, and a lookup per pair is
# what keeps an id (three per recorded attempt, one per event) cheap to make.
_PAIRS = tuple(a + b for a in _ALPHABET for b in _ALPHABET)
# Crockford's digits as the ones int() reads in base 32; every other ASCII character as one
# it refuses (int() would take lowercase letters, "_", signs and spaces).
_TO_INT = str.maketrans(
    {chr(c): "!" for c in range(128)}
    | {char: "0123456789abcdefghijklmnopqrstuv"[value] for value, char in enumerate(_ALPHABET)}
)


def _encode(value: int, length: int) -> str:
    pairs = []
    for _ in range(length // 2):
        pairs.append(_PAIRS[value & 1023])
        value >>= 10
    return "".join(reversed(pairs))


def _decode(text: str) -> int | None:
    if not text.isascii():
        return None  # int() reads other scripts' digits too
    try:
        return int(text.translate(_TO_INT), 32)
    except ValueError:
        return None


def random_mark() -> int:
    return secrets.randbelow(MARKS)


def uid_mark(uid: str) -> int:
    """The mark of an application created with this uid: its uid's mapping is kept in that
    bucket (keys.apps_uid), so creating both is one step. Stable across processes and
    releases (BLAKE2b, not Python's salted hash)."""
    digest = hashlib.blake2b(uid.encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big") % MARKS


def new_id(prefix: str, now_ms: int | None = None, *, mark: int = 0) -> str:
    """``mark``: the application's (``mark_of`` its id); 0 is the default application's."""
    if not 0 <= mark < MARKS:
        raise ValueError(f"an id's mark is 0..{MARKS - 1}, not {mark}")
    ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    with _last_lock:
        last_ms, last_random = _last.get((prefix, mark), (-1, 0))
        if ms == last_ms and last_random < _RANDOM_MAX:
            random = last_random + 1
        else:
            random = secrets.randbits(5 * _RANDOM_LEN)
        _last[prefix, mark] = (ms, random)
    return f"{prefix}_{_encode((ms << _AFTER_TIME) | (mark << _AFTER_MARK) | random, _BODY_LEN)}"


# Remembered: the path of one delivery asks for the bucket of its delivery, event and
# endpoint ids a dozen times, and an endpoint's for every delivery to it.
@functools.lru_cache(maxsize=8192)
def mark_of(identifier: str) -> int:
    """The mark an id carries: its application's. 0 for an id made before the store had
    buckets (older than the epoch) and for one that is no time-sortable id."""
    body = identifier.partition("_")[2]
    head = _decode(body[: _TIME_LEN + _MARK_LEN]) if len(body) >= _BODY_LEN else None
    if head is None or head >> (5 * _MARK_LEN) < _epoch_ms:
        return 0
    return head & (MARKS - 1)


def id_bound(prefix: str, ms: int, *, upper: bool) -> str:
    """The smallest (or largest) id a given millisecond can produce."""
    return f"{prefix}_{_encode(ms, 10)}{(_ALPHABET[-1] if upper else _ALPHABET[0]) * 16}"


def id_time_ms(identifier: str) -> int:
    made = _decode(identifier.partition("_")[2][:_TIME_LEN])
    if made is None:
        raise ValueError(f"{identifier!r} holds no time")
    return made


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
