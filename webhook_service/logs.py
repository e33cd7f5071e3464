"""Log lines for every role: readable for people, JSON lines for machines.

``WEBHOOK_LOG_FORMAT=console`` (default) or ``json``. A line carries the ids it is about
when the code logging it passes them in ``extra`` (``event_id``, ``delivery_id``,
``endpoint_id``, and a few details of an attempt), so one delivery's story is a grep away.
With traces on (``tracing.py``), a line logged within a span also carries its ``trace_id``
and ``span_id``, to go from the line to the trace and back.
Only those named fields leave ``extra``, and every record is redacted before any formatter
sees it (``redaction.py``): no secret reaches a line.

A client's broken HTTP is the client's error, not ours: aiohttp logs each at ERROR with a
traceback, which anyone who can reach the port could repeat to flood the log and bury real
errors. ``ClientErrorFilter`` turns those into one INFO line per kind a minute.

A store that refuses (out of memory, its disk full…) is told the same way: one WARNING per
cause a minute (``store/refusals.py``), also for the libraries that would log a traceback
each time (``RefusalFilter``).
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from typing import Any

import orjson

from webhook_service import tracing
from webhook_service.api.problems import client_error
from webhook_service.config import Settings
from webhook_service.log_window import WINDOW, LineWindow
from webhook_service.redaction import configured_secrets, install_log_redaction
from webhook_service.store.refusals import REFUSALS, classify
from webhook_service.timeutil import iso

IDS = ("event_id", "delivery_id", "endpoint_id")
FIELDS = (*IDS, "attempt", "code", "error", "status")


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    found = {name: record.__dict__.get(name) for name in FIELDS}
    fields = {name: value for name, value in found.items() if value is not None}
    # Formatted in the thread (and asyncio task) that logged: its current span is the line's.
    ids = tracing.current_ids() if tracing.enabled() else None
    if ids is not None:
        fields["trace_id"], fields["span_id"] = ids
    return fields


class JsonFormatter(logging.Formatter):
    def __init__(self, role: str) -> None:
        super().__init__()
        self._role = role

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": iso(int(record.created * 1000)),
            "level": record.levelname,
            "role": self._role,
            "logger": record.name,
            "message": record.getMessage(),
            **_fields(record),
        }
        if record.exc_info:
            line["exc"] = record.exc_text or self.formatException(record.exc_info)
        return orjson.dumps(line, default=str).decode()


class ConsoleFormatter(logging.Formatter):
    def __init__(self, role: str) -> None:
        super().__init__(f"%(asctime)s %(levelname)s {role} %(name)s %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        extra = " ".join(f"{name}={value}" for name, value in _fields(record).items())
        text = super().formatMessage(record)
        return f"{text} [{extra}]" if extra else text


_client_errors = logging.getLogger("webhook_service.api.client_errors")


class ClientErrorFilter(logging.Filter):
    """On aiohttp's server logger: a record blaming a client's broken HTTP on us becomes one
    INFO line of our own per kind each ``window`` seconds, with how many were left out.

    Only the kind and status are told, not aiohttp's message: that quotes the client's bytes
    (the offending header line, the URL), which a key may be in.
    """

    def __init__(self, window: float = WINDOW, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._lines = LineWindow(window, clock)

    def filter(self, record: logging.LogRecord) -> bool:
        found = client_error(record.exc_info[1] if record.exc_info else None)
        if record.levelno <= logging.INFO or found is None:
            return True
        kind = f"{found[0]} {found[1]}"
        left_out = self._lines.admit(kind)
        if left_out is not None:
            more = f"; {left_out} more of this kind since the last such line" if left_out else ""
            _client_errors.info("client error %s (aiohttp: %s)%s", kind, record.getMessage(), more)
        return False


class RefusalFilter(logging.Filter):
    """On the root handler: a record whose exception is the store refusing (``classify``),
    from a library that logs it with its traceback each time (kombu refreshing a binding on
    a full server, Celery's consumer losing its connection), becomes part of our own count
    and our one WARNING per cause a minute (``REFUSALS``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        refusal = classify(exc) if exc is not None else None
        if exc is None or refusal is None:
            return True
        REFUSALS.note(refusal, exc, f"{record.name}: {record.getMessage()}"[:200])
        return False


def setup(settings: Settings, role: str) -> None:
    """One stderr handler on the root logger, in the configured format; safe to repeat."""
    install_log_redaction(configured_secrets(settings))
    # No format here names the caller's file and line, its thread or its process: not
    # looking them up makes a line a fifth cheaper (the logging HOWTO's "Optimization"),
    # and a worker writes one per attempt.
    logging._srcfile = None
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    handler = logging.StreamHandler(sys.stderr)
    json = settings.log_format == "json"
    handler.setFormatter(JsonFormatter(role) if json else ConsoleFormatter(role))
    handler.addFilter(RefusalFilter())
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(settings.log_level.upper())
    server = logging.getLogger("aiohttp.server")
    server.filters = [f for f in server.filters if not isinstance(f, ClientErrorFilter)]
    server.addFilter(ClientErrorFilter())
