"""An attempt's headers in the SQL log, for real: API → Valkey → Celery worker → POST to a
receiver answering a huge header set → record → outbox → the scheduler's shipper → SQLite,
and PostgreSQL. The log holds the request headers we sent (the endpoint's own values
redacted; the signature verifies against the stored body) and the answer's within their
bounds."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from standardwebhooks.webhooks import Webhook

from tests.integration.conftest import Api, send_event, settings_for, wait_for
from tests.support.receiver import Receiver
from tests.support.stack import Stack
from webhook_service.delivery.engine import REDACTED
from webhook_service.delivery.transport import (
    OMITTED,
    RECORDED_HEADER_BYTES,
    RECORDED_HEADERS,
    USER_AGENT,
)
from webhook_service.history import tables
from webhook_service.history.database import sync_engine

pytestmark = pytest.mark.both_logs

NAME = "headers-log"
TYPE = "log.headers"
CREDENTIAL = "Bearer receiver-credential-0123456789"
# 27 lines with aiohttp's own four (the sender takes 32 at most), 40 KB in all.
PADDING = [(f"X-Padding-{i:02}", f"{i:02}" + "p" * 1998) for i in range(20)]
ANSWER = [("X-Request-Id", "r-1"), ("Set-Cookie", "session=abc; HttpOnly"),
          ("Set-Cookie", "csrf=def"), *PADDING]  # fmt: skip


async def _endpoint(api: Api, receiver: Receiver) -> str:
    status, body, _ = await api.call(
        "POST",
        "/v1/endpoints",
        json={
            "url": receiver.url(NAME),
            "event_types": [TYPE],
            "headers": {"Authorization": CREDENTIAL, "X-Tenant": "acme"},
        },
    )
    assert status == 201, body
    api.created_endpoints.append(body["id"])
    receiver.secrets[NAME] = [body["secret"]]
    secret: str = body["secret"]
    return secret


async def test_the_log_holds_the_headers_sent_and_the_answers_within_bounds(
    stack: Stack, api: Api, receiver: Receiver
) -> None:
    secret = await _endpoint(api, receiver)
    receiver.answer_headers[NAME] = ANSWER
    event_id = await send_event(api, TYPE, {"n": 1})
    engine = sync_engine(settings_for(stack))
    query = (
        sa.select(
            tables.attempts.c.request_headers,
            tables.attempts.c.response_headers,
            tables.events.c.body,
        )
        .join(tables.deliveries, tables.deliveries.c.id == tables.attempts.c.delivery_id)
        .join(tables.events, tables.events.c.id == tables.deliveries.c.event_id)
        .where(tables.deliveries.c.event_id == event_id)
    )
    rows: list[Any] = []

    async def logged() -> bool:
        with engine.connect() as conn:
            rows[:] = conn.execute(query).all()
        return bool(rows)

    try:
        await wait_for(logged, timeout=30)
    finally:
        engine.dispose()
    [(sent, answered, body)] = rows
    [got] = receiver.for_endpoint(NAME)

    assert got.headers["Authorization"] == CREDENTIAL  # the receiver had it; the log has not
    assert sent == {
        "user-agent": USER_AGENT,
        "authorization": REDACTED,
        "x-tenant": REDACTED,
        "webhook-id": event_id,
        "webhook-timestamp": got.headers["webhook-timestamp"],
        "webhook-signature": got.headers["webhook-signature"],
        "content-type": "application/json",
    }
    # What the log holds is enough to check what was signed.
    assert body.encode() == got.body
    assert Webhook(secret).verify(body, sent)["data"] == {"n": 1}

    assert answered["content-type"] == "text/plain; charset=utf-8"
    assert answered["x-request-id"] == "r-1"
    assert answered["set-cookie"] == f"{REDACTED}, {REDACTED}"
    assert {"date", "server", "content-length"} <= set(answered)
    assert len(answered) <= RECORDED_HEADERS
    assert sum(len(n.encode()) + len(v.encode()) for n, v in answered.items()) <= (
        RECORDED_HEADER_BYTES
    )
    padding = [n for n in answered if n.startswith("x-padding-")]
    assert padding and all(answered[n].endswith("\u2026") for n in padding)
    assert answered[OMITTED] == f"{len(PADDING) - len(padding)} headers"
