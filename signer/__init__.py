"""Standard Webhooks signing and verification (HMAC ``v1`` and Ed25519 ``v1a``).

Depends only on the standard library and ``cryptography`` so that senders,
receivers and the CLI can use it without the rest of the service.
"""

from signer.errors import (
    InvalidKeyError,
    InvalidTimestampError,
    MissingHeaderError,
    NoMatchingSignatureError,
    TimestampTooNewError,
    TimestampTooOldError,
    WebhookVerificationError,
)
from signer.keys import SigningKey, generate_keypair, generate_secret
from signer.sign import Signer, sign_headers
from signer.verify import Verifier

__all__ = [
    "InvalidKeyError",
    "InvalidTimestampError",
    "MissingHeaderError",
    "NoMatchingSignatureError",
    "Signer",
    "SigningKey",
    "TimestampTooNewError",
    "TimestampTooOldError",
    "Verifier",
    "WebhookVerificationError",
    "generate_keypair",
    "generate_secret",
    "sign_headers",
]
