"""Receiver side: checking the ``webhook-*`` headers of an incoming request."""

from __future__ import annotations

import binascii
import hmac
import operator
import time
from collections.abc import Mapping, Sequence

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from signer.errors import (
    InvalidKeyError,
    InvalidTimestampError,
    MissingHeaderError,
    NoMatchingSignatureError,
    TimestampTooNewError,
    TimestampTooOldError,
)
from signer.keys import (
    HMAC_PREFIX,
    PRIVATE_PREFIX,
    PUBLIC_PREFIX,
    HmacKey,
    decode_hmac_secret,
    decode_public_key,
)

DEFAULT_TOLERANCE = 300

_ED25519_SIGNATURE_BYTES = 64
# Real timestamps have 10 digits; the cap keeps int() away from huge attacker input.
_MAX_TIMESTAMP_DIGITS = 15


def _parse_key(text: str) -> HmacKey | Ed25519PublicKey:
    # Keys read from files or env often end in a newline; the references ignore it too.
    text = text.strip()
    if text.startswith(HMAC_PREFIX):
        return HmacKey(decode_hmac_secret(text[len(HMAC_PREFIX) :]))
    if text.startswith(PUBLIC_PREFIX):
        return decode_public_key(text[len(PUBLIC_PREFIX) :])
    if text.startswith(PRIVATE_PREFIX):
        raise InvalidKeyError(
            "a whsk_ private key belongs to the sender; verify with its whpk_ key"
        )
    if "_" in text:
        # "_" is outside the base64 alphabet, so this is an unknown prefix, not a raw secret.
        raise InvalidKeyError("key must be whsec_…, whpk_… or a raw base64 secret")
    # The reference libraries accept a bare base64 secret, so receivers may be configured so.
    return HmacKey(decode_hmac_secret(text))


def _header(headers: Mapping[str, str], name: str) -> str:
    # Direct lookup first: it hits for lower-case dicts and for case-insensitive
    # mappings (aiohttp's CIMultiDict); the scan covers plain dicts in any case.
    value = headers.get(name)
    if value is None:
        for key, candidate in headers.items():
            if key.lower() == name:
                value = candidate
                break
    if not value:
        raise MissingHeaderError(f"missing or empty header: {name}")
    return value


def _preview(value: str) -> str:
    return repr(value if len(value) <= 32 else value[:32] + "…")


def _decode_signature(encoded: str) -> bytes | None:
    try:
        return binascii.a2b_base64(encoded, strict_mode=True)
    except ValueError:
        return None


class Verifier:
    """Checks timestamp freshness, then that any signature matches any key.

    Keys may mix ``whsec_`` secrets (or bare base64), which check ``v1``
    signatures, and ``whpk_`` public keys, which check ``v1a`` signatures.
    """

    __slots__ = ("_hmac_keys", "_public_keys", "_tolerance")

    def __init__(self, keys: Sequence[str], tolerance: int = DEFAULT_TOLERANCE) -> None:
        if isinstance(keys, str):
            # A bare string is a Sequence too; iterating it would parse characters.
            raise TypeError("keys must be a sequence of keys, not a single string")
        tolerance = operator.index(tolerance)
        if tolerance < 0:
            raise ValueError(f"tolerance must be >= 0 seconds, got {tolerance}")
        hmac_keys: list[HmacKey] = []
        public_keys: list[Ed25519PublicKey] = []
        for index, text in enumerate(keys):
            try:
                key = _parse_key(text)
            except InvalidKeyError as exc:
                raise InvalidKeyError(f"verification key #{index}: {exc}") from None
            if isinstance(key, HmacKey):
                hmac_keys.append(key)
            else:
                public_keys.append(key)
        if not hmac_keys and not public_keys:
            raise InvalidKeyError("at least one verification key is required")
        self._hmac_keys = tuple(hmac_keys)
        self._public_keys = tuple(public_keys)
        self._tolerance = tolerance

    def verify(self, body: bytes, headers: Mapping[str, str], now: int | None = None) -> bytes:
        """Return ``body`` if the request is authentic, else raise a
        :class:`~signer.errors.WebhookVerificationError` subclass saying why.

        ``body`` must be the raw bytes as received: re-serialised JSON will not match.
        """
        msg_id = _header(headers, "webhook-id")
        stamp = _header(headers, "webhook-timestamp")
        signatures = _header(headers, "webhook-signature")

        if not (stamp.isascii() and stamp.isdigit() and len(stamp) <= _MAX_TIMESTAMP_DIGITS):
            raise InvalidTimestampError(
                f"webhook-timestamp must be integer Unix seconds, got {_preview(stamp)}"
            )
        timestamp = int(stamp)
        if now is None:
            now = int(time.time())
        if timestamp < now - self._tolerance:
            raise TimestampTooOldError(
                f"webhook-timestamp {timestamp} is {now - timestamp} s in the past"
                f" (now {now}, tolerance {self._tolerance} s)"
            )
        if timestamp > now + self._tolerance:
            raise TimestampTooNewError(
                f"webhook-timestamp {timestamp} is {timestamp - now} s in the future"
                f" (now {now}, tolerance {self._tolerance} s)"
            )

        # The header text, not the parsed integer, is what the sender signed.
        prefix = f"{msg_id}.{stamp}.".encode()
        expected: list[bytes] | None = None
        content: bytes | None = None
        v1 = v1a = unknown = malformed = 0
        for entry in signatures.split():
            version, _, encoded = entry.partition(",")
            if version == "v1":
                v1 += 1
                signature = _decode_signature(encoded)
                if signature is None:
                    malformed += 1
                    continue
                if expected is None:
                    # Computed once per request, not once per signature in the header.
                    expected = [key.digest(prefix, body) for key in self._hmac_keys]
                for mac in expected:
                    if hmac.compare_digest(mac, signature):
                        return body
            elif version == "v1a":
                v1a += 1
                if not self._public_keys:
                    # Spares copying the body for content no key could check.
                    continue
                signature = _decode_signature(encoded)
                if signature is None or len(signature) != _ED25519_SIGNATURE_BYTES:
                    malformed += 1
                    continue
                if content is None:
                    content = prefix + body
                for public_key in self._public_keys:
                    try:
                        public_key.verify(signature, content)
                    except InvalidSignature:
                        continue
                    return body
            else:
                # Standard Webhooks: versions we do not know are skipped, so senders
                # can add new schemes without breaking older receivers.
                unknown += 1
        raise NoMatchingSignatureError(
            f"no signature matched: {v1} v1 against {len(self._hmac_keys)} HMAC secret(s),"
            f" {v1a} v1a against {len(self._public_keys)} public key(s),"
            f" {malformed} malformed, {unknown} of unknown version skipped"
        )

    def __repr__(self) -> str:
        return (
            f"Verifier(hmac_keys={len(self._hmac_keys)}, public_keys={len(self._public_keys)},"
            f" tolerance={self._tolerance})"
        )
