"""Small records sealed under the master key for a browser or a client to carry: the
dashboard's session cookie and the portal's credential.

AES-GCM through the keyring that seals endpoint secrets (crypto.SecretBox), each kind of
record with associated data of its own (``purpose``), so one never opens as another. Any
API process opens what another sealed, and nobody can read or forge one. The result is
URL-safe base64: it travels in a cookie and in an Authorization header, which may carry
neither the sealed form's ':' nor '+' unquoted.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import orjson

from webhook_service.crypto import MasterKeyError, SecretBox


def seal(box: SecretBox, purpose: str, fields: dict[str, Any]) -> str:
    sealed = box.seal(orjson.dumps(fields).decode(), purpose)
    return base64.urlsafe_b64encode(sealed.encode()).decode()


def unseal(box: SecretBox, purpose: str, text: str) -> dict[str, Any] | None:
    """The fields of a record we sealed for ``purpose``; None for anything else (forged,
    cut, another purpose's, or of a master key this process no longer holds)."""
    try:
        sealed = base64.urlsafe_b64decode(text.encode()).decode()
        fields = orjson.loads(box.open(sealed, purpose))
    except (binascii.Error, UnicodeDecodeError, ValueError, MasterKeyError):
        # orjson.JSONDecodeError is a ValueError.
        return None
    return fields if isinstance(fields, dict) else None
