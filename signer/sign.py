"""Sender side: producing the three ``webhook-*`` headers."""

from __future__ import annotations

import operator
from collections.abc import Sequence

from signer.errors import InvalidKeyError
from signer.keys import SigningKey


class Signer:
    """Signs with every configured key; parse once, reuse across deliveries.

    Several keys produce several space-separated signatures, which is how a
    secret is rotated: receivers accept the message if any one matches.
    """

    __slots__ = ("_keys", "_sign_parts")

    def __init__(self, keys: Sequence[str | SigningKey]) -> None:
        if isinstance(keys, str):
            # A bare string is a Sequence too; iterating it would parse characters.
            raise TypeError("keys must be a sequence of keys, not a single string")
        parsed: list[SigningKey] = []
        for index, key in enumerate(keys):
            if isinstance(key, SigningKey):
                parsed.append(key)
                continue
            try:
                parsed.append(SigningKey.parse(key))
            except InvalidKeyError as exc:
                raise InvalidKeyError(f"signing key #{index}: {exc}") from None
        if not parsed:
            raise InvalidKeyError("at least one signing key is required")
        self._keys = tuple(parsed)
        self._sign_parts = tuple(key.sign_parts for key in parsed)

    def signature(self, msg_id: str, timestamp: int, body: bytes) -> str:
        """Value of ``webhook-signature``: one signature per key, in key order."""
        return self._signature(f"{msg_id}.{operator.index(timestamp)}.".encode(), body)

    def headers(self, msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
        """``webhook-id``, ``webhook-timestamp`` and ``webhook-signature``."""
        # operator.index rejects floats: receivers only accept integer seconds.
        stamp = str(operator.index(timestamp))
        return {
            "webhook-id": msg_id,
            "webhook-timestamp": stamp,
            "webhook-signature": self._signature(f"{msg_id}.{stamp}.".encode(), body),
        }

    def _signature(self, prefix: bytes, body: bytes) -> str:
        if len(self._sign_parts) == 1:
            return self._sign_parts[0](prefix, body)
        return " ".join([sign(prefix, body) for sign in self._sign_parts])

    def __repr__(self) -> str:
        return f"Signer(keys={list(self._keys)!r})"


def sign_headers(keys: Sequence[str], msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """One-off signing; hot paths should keep a :class:`Signer` instead."""
    return Signer(keys).headers(msg_id, timestamp, body)
