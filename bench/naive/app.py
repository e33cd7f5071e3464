"""One Celery task per delivery: sign with ``hmac``, POST with ``requests``, retry on failure.

This is the shape most tutorials give (default Celery settings, a fresh ``requests.post``
per task, ``self.retry`` with a countdown), kept honest: it signs exactly as we do
(Standard Webhooks), so the receivers check both the same way. The worker runs as
``celery -A bench.naive.app worker -Q naive`` with the broker in ``NAIVE_BROKER_URL``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import time

import requests
from celery import Celery, Task

QUEUE = "naive"
TASK = "naive.deliver"

app = Celery("naive", broker=os.environ.get("NAIVE_BROKER_URL", "redis://127.0.0.1:6379/0"))
app.conf.task_default_queue = QUEUE


def sign(secret: str, msg_id: str, timestamp: int, body: str) -> str:
    key = base64.b64decode(secret.removeprefix("whsec_"))
    content = f"{msg_id}.{timestamp}.{body}".encode()
    digest = hmac.new(key, content, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


@app.task(name=TASK, bind=True, max_retries=8, default_retry_delay=5)
def deliver(self: Task[..., None], url: str, secret: str, msg_id: str, body: str) -> None:
    timestamp = int(time.time())
    headers = {
        "Content-Type": "application/json",
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(secret, msg_id, timestamp, body),
    }
    try:
        response = requests.post(url, data=body, headers=headers, timeout=15)
        response.raise_for_status()
    except requests.RequestException as exc:
        raise self.retry(exc=exc) from exc
