"""Applications and their endpoints straight through the scripts, for the store's tests
(tests/integration/conftest.py save_endpoint makes endpoints of the default application)."""

from __future__ import annotations

import orjson
from redis.asyncio import Redis

from webhook_service.ids import mark_of, new_id
from webhook_service.store.applications import (
    ApplicationOutcome,
    ApplicationRecord,
    ApplicationStore,
    new_app_id,
)
from webhook_service.store.endpoints import EndpointSaveArgs, SaveOutcome
from webhook_service.store.scripts import Scripts


async def new_app(
    client: Redis, at: int, *, uid: str | None = None, rate_limit: float | None = None
) -> str:
    """A new application's id (of its uid's bucket, or a random one's, as the API makes)."""
    record = ApplicationRecord(new_app_id(at, uid), "tenant", uid, {}, rate_limit, at, at)
    assert await ApplicationStore(client, Scripts(client)).create(record) is (
        ApplicationOutcome.CREATED
    )
    return record.id


async def app_endpoint(
    scripts: Scripts,
    app_id: str,
    event_types: list[str] | None,
    at: int,
    channels: list[str] | None = None,
) -> str:
    """A new endpoint of the application (of its bucket), through endpoint_save.lua."""
    endpoint_id = new_id("ep", at, mark=mark_of(app_id))
    fields: dict[str, str | int] = {
        "url": "http://127.0.0.1:9/x",
        "event_types": "" if event_types is None else orjson.dumps(event_types).decode(),
        "channels": orjson.dumps(sorted(channels)).decode() if channels else "",
        "operations": "0", "disabled": "0", "created": at, "updated": at,
    }  # fmt: skip
    args = EndpointSaveArgs(endpoint_id, 0, fields, app_id)
    assert await scripts.run("endpoint_save", args.keys(), args.argv()) == SaveOutcome.CREATED
    return endpoint_id
