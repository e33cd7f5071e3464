"""Log lines for every role: readable for people, JSON lines for machines.

``WEBHOOK_LOG_FORMAT=console`` (default) or ``json``. A line carries the ids it is about
when the code logging it passes them in ``extra`` (``event_id``, ``delivery_id``,
``endpoint_id``, and a few details of an attempt), so one delivery's story is a grep away.
Only those named fields leave ``extra``, and every record is redacted before any formatter
sees it (``redaction.py``): no secret reaches a line.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import orjson

from webhook_service.config import Settings
from webhook_service.redaction import configured_secrets, install_log_redaction
from webhook_service.timeutil import iso

IDS = ("event_id", "delivery_id", "endpoint_id")
FIELDS = (*IDS, "attempt", "code", "error", "status")


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    found = {name: record.__dict__.get(name) for name in FIELDS}
    return {name: value for name, value in found.items() if value is not None}


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


def setup(settings: Settings, role: str) -> None:
    """One stderr handler on the root logger, in the configured format; safe to repeat."""
    install_log_redaction(configured_secrets(settings))
    handler = logging.StreamHandler(sys.stderr)
    json = settings.log_format == "json"
    handler.setFormatter(JsonFormatter(role) if json else ConsoleFormatter(role))
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(settings.log_level.upper())
