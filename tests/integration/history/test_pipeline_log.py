"""The whole path into the SQL log, for real: API → Valkey → Celery worker → signed POST →
record → outbox → the scheduler process's shipper → SQLite, and PostgreSQL. Every attempt
the receiver saw is in SQL exactly once."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tests.integration.conftest import Api, create_endpoint, send_event, settings_for, wait_for
from tests.support.receiver import Receiver
from tests.support.stack import Stack
from webhook_service.history import tables
from webhook_service.history.database import sync_engine

pytestmark = pytest.mark.both_logs


async def test_every_attempt_the_receiver_saw_is_in_sql_once(
    stack: Stack, api: Api, receiver: Receiver
) -> None:
    receiver.behaviours["flaky-log"] = lambda _name, n: 500 if n % 3 == 1 else 200
    await create_endpoint(api, receiver, "flaky-log", ["log.checked"])
    sent = {await send_event(api, "log.checked", {"n": n}) for n in range(20)}
    engine = sync_engine(settings_for(stack))

    def logged() -> list[sa.Row[tuple[str, str, int, str, dict[str, str], dict[str, str]]]]:
        with engine.connect() as conn:
            return list(
                conn.execute(
                    sa.select(
                        tables.attempts.c.delivery_id,
                        tables.deliveries.c.event_id,
                        tables.attempts.c.number,
                        tables.deliveries.c.status,
                        tables.attempts.c.request_headers,
                        tables.attempts.c.response_headers,
                    )
                    .join(
                        tables.deliveries, tables.deliveries.c.id == tables.attempts.c.delivery_id
                    )
                    .where(tables.deliveries.c.event_id.in_(sent))
                )
            )

    async def settled() -> bool:
        seen = [r for r in receiver.for_endpoint("flaky-log") if r.webhook_id in sent]
        rows = logged()
        succeeded = {row.event_id for row in rows if row.status == "succeeded"}
        return len(seen) == len(rows) and succeeded == sent

    try:
        await wait_for(settled, timeout=60)
        seen = [r for r in receiver.for_endpoint("flaky-log") if r.webhook_id in sent]
        rows = logged()
        # Exactly once: as many attempt rows per event as POSTs the receiver got for it.
        per_event = {e: sum(1 for r in seen if r.webhook_id == e) for e in sent}
        assert {e: sum(1 for row in rows if row.event_id == e) for e in sent} == per_event
        # Each attempt holds the headers that went out and those the receiver answered.
        assert all(row.request_headers["webhook-id"] == row.event_id for row in rows)
        assert all(row.response_headers["content-type"].startswith("text/") for row in rows)
    finally:
        engine.dispose()
