"""No key material in logs, error bodies or metrics, whatever a client sends and wherever
it puts its key."""

from __future__ import annotations

import logging

import pytest
from redis.asyncio import Redis

from tests.integration.conftest import Api
from tests.support.apikeys import make_key
from tests.support.stack import ADMIN_KEY, Stack
from webhook_service.store import keys
from webhook_service.store.connect import async_client


async def raw(api: Api, method: str, path: str, headers: dict[str, str]) -> tuple[int, str]:
    async with api.session.request(method, api.base + path, headers=headers) as response:
        return response.status, await response.text()


async def test_no_key_material_in_logs_bodies_or_metrics(
    api: Api, stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    created = await make_key(api, ["events:read"])
    key = created["key"]
    revoked = await make_key(api, ["events:read"])
    await api.call("DELETE", f"/v1/api-keys/{revoked['id']}")
    wrong = key[:-6] + "ffffff"
    bodies: list[str] = []
    for presented in (ADMIN_KEY, key, wrong, revoked["key"]):
        for method, path in (
            ("GET", "/v1/events/msg_nothing"),  # 404 (or 401)
            ("POST", "/v1/api-keys"),  # 403 for the API keys, 415 for the admin
            ("GET", f"/v1/endpoints?api_key={presented}"),  # a key put in the URL
        ):
            status, text = await raw(api, method, path, {"Authorization": f"Bearer {presented}"})
            if status >= 400:
                bodies.append(text)
    # A header line past the HTTP parser's limit: aiohttp quotes its start in its own log.
    await raw(api, "GET", "/v1/endpoints", {"Authorization": f"Bearer {key}" + "x" * 40_000})
    # An unusual scheme aiohttp does not parse but a careless logger might print.
    await raw(api, "GET", "/v1/endpoints", {"Authorization": f"Token {key}"})
    status, metrics = await raw(api, "GET", "/metrics", {"Authorization": f"Bearer {ADMIN_KEY}"})
    assert status == 200

    client: Redis = async_client(stack.valkey.url)
    try:
        pepper = await client.get(keys.API_KEY_PEPPER)
        digest = await client.hget(keys.api_key(created["id"]), "digest")
    finally:
        await client.aclose()
    logged = caplog.text + "".join(r.exc_text or "" for r in caplog.records)
    # The capture saw the traffic, the parser's complaint included, so it could see a leak.
    assert "aiohttp.access" in logged or "GET /v1/endpoints" in logged
    assert "Got more than" in logged
    secrets = [ADMIN_KEY, key, wrong, revoked["key"], pepper, digest]
    secrets += [s.rpartition("_")[2] for s in (key, wrong, revoked["key"])]
    for where, text in (("logs", logged), ("bodies", "".join(bodies)), ("metrics", metrics)):
        leaked = [s for s in secrets if s and s in text]
        assert not leaked, f"key material in {where}"
