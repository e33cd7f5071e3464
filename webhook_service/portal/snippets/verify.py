# pip install standardwebhooks
import os
from typing import Any

from standardwebhooks import Webhook

# Your endpoint's signing secret (whsec_...), from this portal.
webhook = Webhook(os.environ["WEBHOOK_SECRET"])


def verified_event(body: bytes, headers: dict[str, str]) -> Any:
    """The event a request carries (its parsed JSON), once its signature and age are checked.

    body: the request's body exactly as it arrived, before any JSON parsing.
    headers: its headers (webhook-id, webhook-timestamp, webhook-signature).
    Raises standardwebhooks.WebhookVerificationError for a request that we did not
    sign, or signed more than five minutes ago: answer it 400 and ignore it.
    """
    return webhook.verify(body, headers)
