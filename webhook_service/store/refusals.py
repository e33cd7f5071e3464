"""When the store refuses: which refusal it is, how it is told and counted, how to wait it out.

Redis or Valkey can refuse a command while it is up and holds every accepted event: at
``maxmemory`` under ``noeviction`` (OOM), when its AOF cannot be written (MISCONF), as a
replica (READONLY, or MASTERDOWN cut off from its primary), short of the replicas
``min-replicas-to-write`` wants (NOREPLICAS), while another script runs past its time limit
(BUSY) or while it replays its AOF (LOADING). A connection can also be closed or time out.
Each of these passes by itself, and nothing was changed by a refused command: the answer
to each is the same, wait and try again. So every part that talks to the store (routes,
dashboard, tick, workers, scheduler) asks ``classify`` whether what it caught is one of
them: the API answers 503 with ``Retry-After``, a background loop waits (``Backoff``).

An error raised by a command inside a Lua script comes back with its code where the server
put it: first (Valkey, ``OOM command not allowed … script: …``), or wrapped (Redis 6,
``ERR Error running script (call to f_…): @user_script:1: … OOM …``; a script's own
``error()``, ``ERR user_script:1: NOREPLICAS …``). The code is looked for wherever it is.

A refusal is told once per cause a minute per process (``REFUSALS``), with how many were
left out, and counted by cause: a traceback per request during an outage of a minute
would be thousands of identical lines.
"""

from __future__ import annotations

import logging
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from enum import StrEnum

import redis.exceptions

from webhook_service.log_window import WINDOW, LineWindow

log = logging.getLogger(__name__)


class Refusal(StrEnum):
    OUT_OF_MEMORY = "out-of-memory"  # OOM: maxmemory reached, and noeviction
    DISK_ERROR = "disk-error"  # MISCONF: the AOF (or an RDB snapshot) cannot be written
    READ_ONLY = "read-only"  # READONLY: a replica, such as a primary demoted by a failover
    NO_REPLICAS = "no-replicas"  # NOREPLICAS: fewer replicas than min-replicas-to-write
    PRIMARY_DOWN = "primary-down"  # MASTERDOWN: a replica that lost its primary
    BUSY = "busy"  # BUSY: a script runs past busy-reply-threshold
    LOADING = "loading"  # LOADING: the server replays its AOF after a start
    CONNECTION = "connection"  # refused, reset or closed; or no free pooled connection
    TIMEOUT = "timeout"  # no reply within the socket timeout


_CODES = {
    "OOM": Refusal.OUT_OF_MEMORY,
    "MISCONF": Refusal.DISK_ERROR,
    "READONLY": Refusal.READ_ONLY,
    "NOREPLICAS": Refusal.NO_REPLICAS,
    "MASTERDOWN": Refusal.PRIMARY_DOWN,
    "BUSY": Refusal.BUSY,
    "LOADING": Refusal.LOADING,
}
# What redis-py makes of the codes it knows (with the code cut off the message).
_CLASSES: tuple[tuple[type[redis.exceptions.RedisError], Refusal], ...] = (
    (redis.exceptions.OutOfMemoryError, Refusal.OUT_OF_MEMORY),
    (redis.exceptions.ReadOnlyError, Refusal.READ_ONLY),
    (redis.exceptions.MasterDownError, Refusal.PRIMARY_DOWN),
    (redis.exceptions.BusyLoadingError, Refusal.LOADING),
)
# A code as a whole word: not BUSYKEY, nor a code inside a longer upper-case word.
_CODE_IN_TEXT = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(_CODES) + r")(?![A-Za-z0-9_])")

# What each refusal means, for a person reading a 503 or a log line.
MEANING = {
    Refusal.OUT_OF_MEMORY: "it is at its memory limit (maxmemory)",
    Refusal.DISK_ERROR: "it cannot write its data to disk",
    Refusal.READ_ONLY: "it is a read-only replica",
    Refusal.NO_REPLICAS: "too few replicas are attached (min-replicas-to-write)",
    Refusal.PRIMARY_DOWN: "it is a replica that lost its primary",
    Refusal.BUSY: "a script is running past its time limit",
    Refusal.LOADING: "it is loading its data after a start",
    Refusal.CONNECTION: "the connection failed or was closed",
    Refusal.TIMEOUT: "it did not answer in time",
}


def classify(exc: BaseException) -> Refusal | None:
    """The refusal ``exc`` is, or None: not a store error, or one that waiting does not
    cure (a script's bug, a wrong type)."""
    if isinstance(exc, redis.exceptions.TimeoutError):
        return Refusal.TIMEOUT
    if not isinstance(exc, redis.exceptions.RedisError):
        return None
    for cls, refusal in _CLASSES:
        if isinstance(exc, cls):
            return refusal
    if isinstance(exc, redis.exceptions.ResponseError):
        found = _CODE_IN_TEXT.search(str(exc))
        return _CODES[found[1]] if found else None
    if isinstance(exc, redis.exceptions.ConnectionError):
        return Refusal.CONNECTION
    return None


def describe(exc: BaseException) -> str:
    """The server's words, with the code redis-py took off them; short."""
    text = str(exc)
    code = exc.status_code if isinstance(exc, redis.exceptions.RedisError) else None
    if code and not text.startswith(code):
        text = f"{code} {text}"
    return text[:200]


class RefusalLog:
    """This process's refusals: counted by cause, and told in one WARNING per cause each
    ``window`` seconds with how many were left out since the last."""

    def __init__(self, window: float = WINDOW, clock: Callable[[], float] = time.monotonic) -> None:
        self._lines = LineWindow(window, clock)
        self._lock = threading.Lock()
        self._counts: Counter[Refusal] = Counter()

    def note(self, refusal: Refusal, exc: BaseException, doing: str) -> None:
        """``doing``: what was refused, as "while <doing>" reads (``recording an attempt``)."""
        with self._lock:
            self._counts[refusal] += 1
        left_out = self._lines.admit(refusal)
        if left_out is None:
            return
        more = f"; {left_out} more of this cause since the last such line" if left_out else ""
        log.warning(
            "store refusal (%s) while %s, as %s: %s%s",
            refusal,
            doing,
            MEANING[refusal],
            describe(exc),
            more,
        )

    def counts(self) -> dict[Refusal, int]:
        with self._lock:
            return dict(self._counts)


# One per process: the API's /metrics serves its counts.
REFUSALS = RefusalLog()


def refused(exc: BaseException, doing: str, tally: RefusalLog = REFUSALS) -> bool:
    """Whether ``exc`` is a refusal; if so it is noted (counted, and told if due)."""
    refusal = classify(exc)
    if refusal is None:
        return False
    tally.note(refusal, exc, doing)
    return True


# Waits while the store refuses: from 0.1 s, doubling, never over 5 s. The cap bounds how
# long after the store's return a loop notices it; a refused command costs the server
# almost nothing, so a few tries a second from each process do it no harm.
BACKOFF_FIRST = 0.1
BACKOFF_CAP = 5.0


class Backoff:
    """Capped exponential waits with jitter (each between half and all of its step), so
    that processes refused at the same moment do not all try again at the same moment."""

    def __init__(
        self,
        first: float = BACKOFF_FIRST,
        cap: float = BACKOFF_CAP,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self._first = first
        self._cap = cap
        self._jitter = jitter
        self._tries = 0

    def next(self) -> float:
        """The wait before the next try; each call makes the following one longer."""
        step = min(self._cap, self._first * 2.0 ** min(self._tries, 30))
        self._tries += 1
        return step * (0.5 + self._jitter() / 2)

    def reset(self) -> None:
        """The store took a command: the next refusal starts from the first wait again."""
        self._tries = 0
