"""Interop with the reference libraries, in both directions.

Both references take the body as ``str`` (verify decodes bytes as UTF-8) and
check freshness against the real clock, so these tests use text bodies and
the current time.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
import standardwebhooks
import svix.webhooks

from signer import Signer, Verifier, generate_keypair, generate_secret

MSG_ID = "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W"
BODIES = [
    "{}",
    '{"type": "invoice.paid", "amount": 4200}',
    '{"name": "Zoë ✓ 日本"}',
    # standardwebhooks' verify() also JSON-parses the body, so even the big one is JSON.
    '{"pad": "' + "x" * 70_000 + '"}',
]
SECRETS = [
    "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    generate_secret(),
    generate_secret(64),
]

References = type[standardwebhooks.Webhook] | type[svix.webhooks.Webhook]
REFERENCES = [
    pytest.param(standardwebhooks.Webhook, id="standardwebhooks"),
    pytest.param(svix.webhooks.Webhook, id="svix"),
]


@pytest.mark.parametrize("reference", REFERENCES)
@pytest.mark.parametrize("secret", SECRETS)
@pytest.mark.parametrize("body", BODIES)
def test_reference_verifies_what_we_sign(reference: References, secret: str, body: str) -> None:
    headers = Signer([secret]).headers(MSG_ID, int(time.time()), body.encode())
    # Raises on failure; svix returns None, standardwebhooks the parsed body.
    reference(secret).verify(body.encode(), headers)


@pytest.mark.parametrize("reference", REFERENCES)
@pytest.mark.parametrize("secret", SECRETS)
@pytest.mark.parametrize("body", BODIES)
def test_we_verify_what_reference_signs(reference: References, secret: str, body: str) -> None:
    now = int(time.time())
    signature = reference(secret).sign(MSG_ID, datetime.fromtimestamp(now, tz=UTC), body)
    headers = {
        "webhook-id": MSG_ID,
        "webhook-timestamp": str(now),
        "webhook-signature": signature,
    }
    assert Verifier([secret]).verify(body.encode(), headers) == body.encode()
    assert signature == Signer([secret]).signature(MSG_ID, now, body.encode())


@pytest.mark.parametrize("reference", REFERENCES)
def test_reference_accepts_our_rotation_header_with_ed25519(reference: References) -> None:
    """A v1a entry (which the references cannot check) must not break them."""
    private, _ = generate_keypair()
    old, new = generate_secret(), generate_secret()
    headers = Signer([private, old, new]).headers(MSG_ID, int(time.time()), b"{}")
    for secret in (old, new):
        reference(secret).verify(b"{}", headers)


@pytest.mark.parametrize("reference", REFERENCES)
def test_raw_base64_secret_means_the_same_key_to_both(reference: References) -> None:
    secret = generate_secret()
    raw = secret.removeprefix("whsec_")
    now = int(time.time())
    signature = reference(raw).sign(MSG_ID, datetime.fromtimestamp(now, tz=UTC), "{}")
    headers = {"webhook-id": MSG_ID, "webhook-timestamp": str(now), "webhook-signature": signature}
    assert Verifier([raw]).verify(b"{}", headers) == b"{}"
    assert Verifier([secret]).verify(b"{}", headers) == b"{}"
