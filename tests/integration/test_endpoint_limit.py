"""WEBHOOK_MAX_ENDPOINTS_PER_APP: the endpoint past the limit is refused, however many are created
at once, and deleting one makes room again."""

from __future__ import annotations

import asyncio
from typing import Any

from redis.asyncio import Redis

from tests.integration.conftest import Api, serve_api, settings_for
from tests.support.receiver import Receiver
from tests.support.stack import Stack
from webhook_service.store import keys
from webhook_service.store.applications import DEFAULT_APP_ID

ROOM = 3  # endpoints the test's limit leaves room for


async def _create(api: Api, receiver: Receiver, n: int) -> tuple[int, Any]:
    status, body, _ = await api.call(
        "POST", "/v1/endpoints", json={"url": receiver.url(f"cap{n}"), "event_types": ["cap.x"]}
    )
    return status, body


async def test_the_endpoint_past_the_limit_is_refused_even_when_created_at_once(
    stack: Stack, receiver: Receiver
) -> None:
    client = Redis.from_url(stack.valkey.url, decode_responses=True)
    limit = await client.zcard(keys.app_endpoints(DEFAULT_APP_ID)) + ROOM
    settings = settings_for(stack).model_copy(update={"max_endpoints_per_app": limit})
    created: list[str] = []
    async with serve_api(settings) as (_, api):
        try:
            answers = await asyncio.gather(*(_create(api, receiver, n) for n in range(12)))
            created = [body["id"] for status, body in answers if status == 201]
            refused = [body for status, body in answers if status != 201]
            assert len(created) == ROOM and len(refused) == 12 - ROOM, answers
            assert await client.zcard(keys.app_endpoints(DEFAULT_APP_ID)) == limit
            for problem in refused:
                assert problem["status"] == 422
                assert problem["type"].rsplit("/", 1)[1] == "endpoint-limit-reached"
                assert str(limit) in problem["detail"]

            status, _, _ = await api.call("DELETE", f"/v1/endpoints/{created.pop()}")
            assert status == 204
            status, body = await _create(api, receiver, 99)
            assert status == 201, body
            created.append(body["id"])
            assert (await _create(api, receiver, 100))[0] == 422
            # Changing an endpoint is no creation: at the limit it still works.
            status, body, _ = await api.call(
                "PATCH", f"/v1/endpoints/{created[0]}", json={"description": "still here"}
            )
            assert status == 200, body
        finally:
            for endpoint_id in created:
                await api.call("DELETE", f"/v1/endpoints/{endpoint_id}")
            await client.aclose()
