"""Endpoint secrets sealed at rest with AES-GCM under the operator's master key.

The endpoint id is the associated data, so a sealed secret copied onto another endpoint
does not open there.
"""

from __future__ import annotations

import base64
import binascii
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

_VERSION = "v1:"
_NONCE_BYTES = 12


class MasterKeyError(ValueError):
    pass


def generate_master_key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


class SecretBox:
    def __init__(self, master_key: str) -> None:
        try:
            raw = base64.b64decode(master_key, validate=True)
        except (binascii.Error, ValueError):
            raise MasterKeyError("the master key is not valid base64") from None
        if len(raw) != 32:
            raise MasterKeyError("the master key must be 32 bytes, base64-encoded")
        self._aead = AESGCM(raw)

    def __repr__(self) -> str:
        return "SecretBox()"

    def seal(self, plaintext: str, associated: str) -> str:
        nonce = os.urandom(_NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, plaintext.encode(), associated.encode())
        return _VERSION + base64.b64encode(nonce + sealed).decode()

    def open(self, token: str, associated: str) -> str:
        if not token.startswith(_VERSION):
            raise MasterKeyError("unknown sealed-secret format")
        blob = base64.b64decode(token[len(_VERSION) :])
        try:
            plain = self._aead.decrypt(
                blob[:_NONCE_BYTES], blob[_NONCE_BYTES:], associated.encode()
            )
        except InvalidTag:
            raise MasterKeyError("a stored secret does not open with this master key") from None
        return plain.decode()
