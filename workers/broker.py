"""kombu's Redis transport, made to wait out a store that refuses its BRPOP.

The broker is the store, or a Redis apart (WEBHOOK_BROKER_URL). A Valkey whose AOF cannot
be written answers every write command with MISCONF, and BRPOP is a write command (it
pops); a replica answers READONLY, a server running a long script BUSY; and redis-py's
health-check PING before a command gets the same refusal. kombu takes any of these for a
channel error, which Celery does not recover from: the worker exited ("Unrecoverable
error: ResponseError('MISCONF …')"), with sends still in flight. Here such a refusal is
noted (``store/refusals.py``) and the channel stops asking for a while (``Backoff``); the
event loop's next turns ask again, until one is served. Nothing is lost meanwhile: the
wake-ups wait in their list, and every delivery has its due entry besides.

A connection that fails is left to kombu and Celery, which reconnect with their own back-off.
"""

from __future__ import annotations

import time
from queue import Empty
from typing import Any

import redis.exceptions
from kombu.transport import redis as kombu_redis

from webhook_service.store.refusals import Backoff, refused


class Channel(kombu_redis.Channel):
    """BRPOP held back while the store refuses it. (kombu's stubs leave out the BRPOP
    methods and state overridden here.)"""

    _refused_until = 0.0
    _backoff: Backoff | None = None

    def _brpop_start(self, timeout: float | None = None) -> None:
        # Not sent now: the event loop calls this again on each of its turns.
        if time.monotonic() < self._refused_until:
            return
        try:
            super()._brpop_start(timeout)  # type: ignore[misc]  # not in celery-types' kombu stubs
        except redis.exceptions.ResponseError as exc:
            # Refused before BRPOP went out (the health check's PING): none is pending.
            self._in_poll = None
            self._brpop_sent_at = None
            if not self._refusing(exc):
                raise

    def _brpop_read(self, **options: Any) -> bool:
        try:
            got: bool = super()._brpop_read(**options)  # type: ignore[misc]  # not in celery-types' kombu stubs
        except redis.exceptions.ResponseError as exc:
            if not self._refusing(exc):
                raise
            raise Empty() from exc  # nothing was popped: nothing to put back
        except Empty:
            self._served()
            raise
        self._served()
        return got

    def _refusing(self, exc: redis.exceptions.ResponseError) -> bool:
        """Whether ``exc`` is a refusal (then noted, and BRPOP waits a while)."""
        if not refused(exc, "waiting for wake-ups (BRPOP)"):
            return False
        if self._backoff is None:
            self._backoff = Backoff()
        self._refused_until = time.monotonic() + self._backoff.next()
        return True

    def _served(self) -> None:
        if self._backoff is not None:
            self._backoff.reset()


class Transport(kombu_redis.Transport):
    Channel = Channel


class SentinelChannel(Channel, kombu_redis.SentinelChannel):
    pass


class SentinelTransport(kombu_redis.SentinelTransport):
    Channel = SentinelChannel
