"""At most one log line per kind of trouble a window, and how many were left out between.

For troubles that come in floods and are each unremarkable (a client's broken HTTP, a store
that refuses writes for a minute): one line tells the operator the kind and the rate; a
line per occurrence, each with a traceback, would bury everything else in the log.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

WINDOW = 60.0


class LineWindow:
    """``admit(kind)``: None while a line of this kind was written within ``window``
    seconds, otherwise how many were left out since that line (0 for the first), and the
    caller writes one now. Safe across threads: a worker process notes troubles from its
    delivery loop's thread and from Celery's."""

    def __init__(self, window: float = WINDOW, clock: Callable[[], float] = time.monotonic) -> None:
        self._window = window
        self._clock = clock
        self._lock = threading.Lock()
        # kind -> (when its last line was written, how many were left out since)
        self._kinds: dict[str, tuple[float, int]] = {}

    def admit(self, kind: str) -> int | None:
        with self._lock:
            now = self._clock()
            written, left_out = self._kinds.get(kind, (-math.inf, 0))
            if now - written < self._window:
                self._kinds[kind] = (written, left_out + 1)
                return None
            self._kinds[kind] = (now, 0)
            return left_out
