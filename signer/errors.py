"""Exceptions raised by signer.

Messages are built at the raise site and never include key material, so they
are safe to log and to return to a subscriber. The classes take a single
message argument on purpose: that keeps them picklable (Celery result
backends pickle exceptions) without custom ``__reduce__`` code.
"""


class WebhookVerificationError(Exception):
    """The request must be rejected; ``str(exc)`` says why."""


class MissingHeaderError(WebhookVerificationError):
    """A required ``webhook-*`` header is absent or empty."""


class InvalidTimestampError(WebhookVerificationError):
    """``webhook-timestamp`` is not an integer number of seconds."""


class TimestampTooOldError(WebhookVerificationError):
    """The message is older than the tolerance allows (possible replay)."""


class TimestampTooNewError(WebhookVerificationError):
    """The message is dated further in the future than the tolerance allows."""


class NoMatchingSignatureError(WebhookVerificationError):
    """No signature in ``webhook-signature`` matches any configured key."""


class InvalidKeyError(ValueError):
    """A secret or key string cannot be used (prefix, base64 or length)."""
