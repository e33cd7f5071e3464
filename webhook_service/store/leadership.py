"""One actor at a time across processes: a Redis lock held by renewing it each pass.

The scheduler and the log shipper each run in every scheduler process, and only the holder
acts. A holder that dies, or loses Redis for longer than the lock's timeout, loses it, and
a standby takes over once it has expired.
"""

from __future__ import annotations

import logging

import redis
from redis.lock import Lock

log = logging.getLogger(__name__)


class Leadership:
    def __init__(self, client: redis.Redis, name: str, timeout: float) -> None:
        self._lock: Lock = client.lock(name, timeout=timeout, blocking=False)
        self.held = False

    def hold(self) -> bool:
        """Renew the lock if held, else try to take it; whether this process may act."""
        if self.held:
            try:
                self._lock.reacquire()
                return True
            except redis.exceptions.LockError:
                self.held = False
        self.held = bool(self._lock.acquire(blocking=False))
        return self.held

    def lost(self) -> None:
        """Redis failed mid-pass: act again only once the lock is taken afresh."""
        self.held = False

    def give_up(self, what: str) -> None:
        """On a clean stop, so a standby need not wait for the lock to expire."""
        if not self.held:
            return
        try:
            self._lock.release()
        except redis.exceptions.RedisError:
            log.info("%s lock not released; it expires by itself", what)
        self.held = False
