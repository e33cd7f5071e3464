"""Credentials never reach a log line, whoever logs them: our code, aiohttp or a library.

Our own code logs no credential. This is the net under that rule, for text we do not
write: aiohttp quotes the first 100 bytes of an over-long header line in its parse errors,
an access log line holds the request target (where a careless client may put a key), and
a traceback quotes whatever its exception says. Every record is redacted as it is made,
before any handler or formatter sees it: a bearer token, anything shaped like one of our
keys or secrets, and the configured secrets spelled out exactly.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

from pydantic import SecretStr

from webhook_service.config import Settings

MASK = "***"

_SHAPES = re.compile(
    # Our key and secret prefixes: API keys, endpoint secrets, ed25519 keys, the admin key.
    r"\b(?P<prefix>wh(?:k|sec|sk|adm)_)[A-Za-z0-9_+/=-]{8,}"
    # Whatever follows "Bearer", quoted or not, up to white space or a delimiter.
    r"|(?P<scheme>\bbearer\s+)[^\s'\",;]+",
    re.IGNORECASE,
)


def _mask(match: re.Match[str]) -> str:
    return (match.group("prefix") or match.group("scheme")) + MASK


class Redactor:
    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # Longest first, so a secret containing a shorter one is masked whole.
        self.secrets = tuple(sorted({s for s in secrets if len(s) >= 8}, key=len, reverse=True))

    def __call__(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, MASK)
        return _SHAPES.sub(_mask, text)


class _RedactingFactory:
    def __init__(self, inner: Callable[..., logging.LogRecord], redactor: Redactor) -> None:
        self.inner = inner
        self.redactor = redactor

    def __call__(self, *args: Any, **kwargs: Any) -> logging.LogRecord:
        record = self.inner(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a bad format string is for logging to report, not for us
            return record
        record.msg, record.args = self.redactor(message), None
        if record.exc_info and not record.exc_text:
            # Formatters print exc_text when set: the traceback is rendered here, redacted.
            record.exc_text = self.redactor(logging.Formatter().formatException(record.exc_info))
        return record


def install_log_redaction(secrets: Iterable[str] = ()) -> None:
    """Redact every log record this process makes from now on. Installs once; a later call
    only adds ``secrets`` to those spelled out."""
    current = logging.getLogRecordFactory()
    if isinstance(current, _RedactingFactory):
        current.redactor = Redactor([*current.redactor.secrets, *secrets])
    else:
        logging.setLogRecordFactory(_RedactingFactory(current, Redactor(secrets)))


def configured_secrets(settings: Settings) -> list[str]:
    """Every secret setting's value (comma lists split), each new secret setting included,
    and the password in the Redis URL."""
    found: list[str] = []
    for name in type(settings).model_fields:
        value = getattr(settings, name)
        if isinstance(value, SecretStr):
            found += [part.strip() for part in value.get_secret_value().split(",")]
    if settings.redis_url:
        found.append(urlsplit(settings.redis_url).password or "")
    return found
