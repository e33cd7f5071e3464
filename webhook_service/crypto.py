"""Endpoint secrets sealed at rest with AES-GCM under the operator's master key.

The endpoint id is the associated data, so a sealed secret copied onto another endpoint
does not open there.

A box holds a keyring: the current master key, which seals, and earlier keys that still
open what they sealed while a master-key rotation is under way. Tokens name their key:

* ``v2:<kid>:`` + base64(nonce + ciphertext), where ``kid`` is the first 8 hex digits of
  SHA-256 over the raw key bytes. For a random 256-bit key this reveals nothing useful, and
  it lets ``open`` pick the key without trial decryption.
* ``v1:`` + base64(nonce + ciphertext), the older format without a key id: still opened,
  by trying each key of the ring in order. New tokens are always ``v2``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from collections.abc import Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

_V1 = "v1:"
_V2 = "v2:"
_KID_HEX = 8
_NONCE_BYTES = 12
_TAG_BYTES = 16


class MasterKeyError(ValueError):
    """A bad master key, or a sealed secret that does not open. Never carries key material."""


def generate_master_key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def _raw_key(master_key: str, what: str) -> bytes:
    try:
        raw = base64.b64decode(master_key.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise MasterKeyError(f"the {what} is not valid base64") from None
    if len(raw) != 32:
        raise MasterKeyError(f"the {what} must be 32 bytes, base64-encoded")
    return raw


def key_id(raw: bytes) -> str:
    """The short public name of a raw key, as written in ``v2`` tokens."""
    return hashlib.sha256(raw).hexdigest()[:_KID_HEX]


def _decode_blob(text: str) -> tuple[bytes, bytes]:
    try:
        blob = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise MasterKeyError("a sealed secret is not valid base64") from None
    if len(blob) < _NONCE_BYTES + _TAG_BYTES:
        raise MasterKeyError("a sealed secret is too short")
    return blob[:_NONCE_BYTES], blob[_NONCE_BYTES:]


def looks_sealed(text: str) -> bool:
    """Whether ``text`` has the shape of a token (``v2:<kid>:`` or ``v1:``, then base64 of a
    nonce and a tag at least), opened or not: tells a value sealed under some key from one
    stored in clear (webhook_service/migrate.py)."""
    if text.startswith(_V2):
        kid, sep, body = text[len(_V2) :].partition(":")
        if not sep or len(kid) != _KID_HEX or kid.strip("0123456789abcdef"):
            return False
    elif text.startswith(_V1):
        body = text[len(_V1) :]
    else:
        return False
    try:
        _decode_blob(body)
    except MasterKeyError:
        return False
    return True


class SecretBox:
    """Seals with ``master_key``; opens with it or with any of ``previous``."""

    def __init__(self, master_key: str, previous: Sequence[str] = ()) -> None:
        if isinstance(previous, str):
            # A lone string would be iterated character by character.
            raise TypeError("previous must be a sequence of keys, not one string")
        current = _raw_key(master_key, "master key")
        ring: dict[str, bytes] = {key_id(current): current}
        for index, text in enumerate(previous, start=1):
            raw = _raw_key(text, f"previous master key #{index}")
            kid = key_id(raw)
            known = ring.get(kid)
            if known is None:
                ring[kid] = raw
            elif known != raw:
                # 32-bit ids of random keys: astronomically unlikely, but never guess.
                raise MasterKeyError(f"previous master key #{index} has the id of another key")
        self._kid = key_id(current)
        # Insertion order: the current key first, then the previous ones as given.
        self._ring: dict[str, AESGCM] = {kid: AESGCM(raw) for kid, raw in ring.items()}

    def __repr__(self) -> str:
        return f"SecretBox(keys={len(self._ring)})"

    @property
    def current_kid(self) -> str:
        return self._kid

    def seal(self, plaintext: str, associated: str) -> str:
        nonce = os.urandom(_NONCE_BYTES)
        sealed = self._ring[self._kid].encrypt(nonce, plaintext.encode(), associated.encode())
        return f"{_V2}{self._kid}:" + base64.b64encode(nonce + sealed).decode()

    def sealed_with_current(self, token: str) -> bool:
        """Whether ``token`` is a ``v2`` token of the current key (a ``v1`` one never is)."""
        return token.startswith(f"{_V2}{self._kid}:")

    def open(self, token: str, associated: str) -> str:
        ad = associated.encode()
        if token.startswith(_V2):
            kid, sep, body = token[len(_V2) :].partition(":")
            if not sep:
                raise MasterKeyError("unknown sealed-secret format")
            aead = self._ring.get(kid)
            if aead is None:
                raise MasterKeyError(
                    f"a stored secret was sealed with master key {kid!r}, which this "
                    "keyring does not hold"
                )
            nonce, sealed = _decode_blob(body)
            try:
                return aead.decrypt(nonce, sealed, ad).decode()
            except InvalidTag:
                raise MasterKeyError("a stored secret does not open with this master key") from None
        if token.startswith(_V1):
            nonce, sealed = _decode_blob(token[len(_V1) :])
            for aead in self._ring.values():
                try:
                    return aead.decrypt(nonce, sealed, ad).decode()
                except InvalidTag:
                    continue
            raise MasterKeyError("a stored secret does not open with any master key held")
        raise MasterKeyError("unknown sealed-secret format")
