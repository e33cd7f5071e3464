"""API keys through the API: shown once, listed without secrets, revoked at once, their own
idempotency windows and ingest rate limits."""

from __future__ import annotations

from typing import Any

import pytest
from openapi_core import OpenAPI

from tests.integration.conftest import Api, serve_api, settings_for

# The contract and its checker, from the module that owns them (fixtures by import).
from tests.integration.test_openapi import contract, spec_call, spec_doc  # noqa: F401
from tests.support.apikeys import GLACIAL_RATE, make_key
from tests.support.stack import Stack

EVENT = {"type": "keys.test", "data": {"n": 1}}


async def test_a_key_is_shown_once_and_listed_without_its_secret(api: Api) -> None:
    created = await make_key(api, ["events:write", "deliveries:read"], 12.5, name="billing")
    assert created["key"].startswith(f"whk_{created['id']}_")
    assert created["scopes"] == ["deliveries:read", "events:write"]
    status, listed, _ = await api.call("GET", "/v1/api-keys?limit=250")
    assert status == 200
    [mine] = [k for k in listed["data"] if k["id"] == created["id"]]
    assert mine == {k: v for k, v in created.items() if k != "key"}
    assert created["key"] not in repr(listed)
    status, _, _ = await api.call("GET", "/v1/events/msg_none", key=created["key"])
    assert status == 403  # events:read was not granted


async def test_the_new_key_works_and_a_wrong_one_does_not(api: Api) -> None:
    created = await make_key(api, ["events:write"])
    status, body, _ = await api.call("POST", "/v1/events", json=EVENT, key=created["key"])
    assert status == 202, body
    wrong = created["key"][:-4] + "0000"
    status, problem, headers = await api.call("POST", "/v1/events", json=EVENT, key=wrong)
    assert status == 401
    assert headers["WWW-Authenticate"].startswith("Bearer")
    assert headers["Content-Type"] == "application/problem+json"
    assert wrong not in repr(problem)


async def test_revocation_holds_at_once_in_every_api_process(api: Api, stack: Stack) -> None:
    created = await make_key(api, ["endpoints:read"])
    async with serve_api(settings_for(stack)) as (_, other):
        assert (await other.call("GET", "/v1/endpoints", key=created["key"]))[0] == 200
        status, _, _ = await api.call("DELETE", f"/v1/api-keys/{created['id']}")
        assert status == 204
        # The very next request, in another process: no cache to wait out.
        assert (await other.call("GET", "/v1/endpoints", key=created["key"]))[0] == 401
    assert (await api.call("GET", "/v1/endpoints", key=created["key"]))[0] == 401
    status, listed, _ = await api.call("GET", "/v1/api-keys?limit=250")
    assert created["id"] not in [k["id"] for k in listed["data"]]
    assert (await api.call("DELETE", f"/v1/api-keys/{created['id']}"))[0] == 404


async def test_a_key_with_admin_scope_can_manage_keys_and_others_cannot(api: Api) -> None:
    admin = await make_key(api, ["admin"])
    writer = await make_key(api, ["endpoints:write", "events:write"])
    body = {"name": "made by a key", "scopes": ["events:read"]}
    status, made, _ = await api.call("POST", "/v1/api-keys", json=body, key=admin["key"])
    assert status == 201
    status, problem, headers = await api.call("POST", "/v1/api-keys", json=body, key=writer["key"])
    assert status == 403
    assert problem["type"].endswith("/insufficient-scope")
    assert 'scope="admin"' in headers["WWW-Authenticate"]
    assert (await api.call("DELETE", f"/v1/api-keys/{made['id']}", key=writer["key"]))[0] == 403


async def test_idempotency_windows_are_per_key(api: Api) -> None:
    first = await make_key(api, ["events:write"])
    second = await make_key(api, ["events:write"])
    headers = {"Idempotency-Key": "per-key-window"}

    async def send(key: str) -> tuple[int, str, str | None]:
        status, body, sent = await api.call(
            "POST", "/v1/events", json=EVENT, headers=headers, key=key
        )
        return status, body["id"], sent.get("Idempotent-Replayed")

    status, event_a, replayed = await send(first["key"])
    assert (status, replayed) == (202, None)
    status, event_b, replayed = await send(second["key"])
    assert (status, replayed) == (202, None)
    assert event_b != event_a
    assert await send(first["key"]) == (202, event_a, "true")
    assert await send(second["key"]) == (202, event_b, "true")


async def test_the_ingest_rate_limit_answers_429_with_retry_after(api: Api) -> None:
    limited = await make_key(api, ["events:write"], GLACIAL_RATE)
    free = await make_key(api, ["events:write"])
    assert (await api.call("POST", "/v1/events", json=EVENT, key=limited["key"]))[0] == 202
    status, problem, headers = await api.call("POST", "/v1/events", json=EVENT, key=limited["key"])
    assert status == 429
    assert headers["Content-Type"] == "application/problem+json"
    assert problem["type"].endswith("/rate-limited")
    # One event per 1000 s: the next may go in about 1000 s, a whole number of seconds.
    assert 900 <= int(headers["Retry-After"]) <= 1000
    assert (await api.call("POST", "/v1/events", json=EVENT, key=free["key"]))[0] == 202
    # Reads are not ingest: the limit is on events only.
    assert (await api.call("GET", "/v1/api-keys", key=limited["key"]))[0] == 403


async def test_invalid_requests_use_up_the_rate_before_their_body_is_read(api: Api) -> None:
    # A limited key must not be able to spend the API's CPU on bodies it knows are bad: the
    # token is taken before the body is parsed, so a refused body costs it one.
    limited = await make_key(api, ["events:write"], GLACIAL_RATE)
    status, _, _ = await api.call(
        "POST", "/v1/events", json={"type": "bad type"}, key=limited["key"]
    )
    assert status == 422
    status, problem, _ = await api.call(
        "POST", "/v1/events", data=b"{not json", key=limited["key"],
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    assert (status, problem["type"].rsplit("/", 1)[1]) == (429, "rate-limited")
    assert (await api.call("POST", "/v1/events", json=EVENT, key=limited["key"]))[0] == 429


@pytest.mark.parametrize(
    "header",
    [None, "Basic dXNlcjpwYXNz", "Bearer", "Bearer ", "Token whk_x", "Bearer ñ-not-ascii"],
)
async def test_missing_or_malformed_credentials_get_401(api: Api, header: str | None) -> None:
    status, problem, headers = await api.call(
        "GET", "/v1/endpoints", key=None, headers={"Authorization": header} if header else {}
    )
    assert status == 401
    assert headers["WWW-Authenticate"].startswith("Bearer")
    assert problem["status"] == 401


async def test_the_answers_match_the_contract(api: Api, contract: OpenAPI) -> None:  # noqa: F811
    async def call(method: str, path: str, **kwargs: Any) -> tuple[int, Any, dict[str, str]]:
        return await spec_call(api, contract, method, path, **kwargs)

    body = {"name": "contract", "scopes": ["events:write"], "rate_limit": GLACIAL_RATE}
    status, created, _ = await call("POST", "/v1/api-keys", json_body=body)
    assert status == 201
    key = created["key"]
    assert (await call("GET", "/v1/api-keys?limit=1"))[0] == 200
    deep = {
        "type": "contract.deep",
        "data": {"x": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]},
    }
    assert (await call("POST", "/v1/events", json_body=EVENT, key=key))[0] == 202
    assert (await call("POST", "/v1/events", json_body=deep))[0] == 422
    assert (await call("POST", "/v1/events", json_body=EVENT, key=key))[0] == 429
    for method, path in (("GET", "/v1/endpoints"), ("POST", "/v1/api-keys")):
        assert (await call(method, path, json_body={}, key=key))[0] == 403
    bad = {"name": "x", "scopes": ["root"]}
    assert (await call("POST", "/v1/api-keys", json_body=bad))[0] == 422
    text = {"Content-Type": "text/plain"}
    assert (await call("POST", "/v1/api-keys", data=b"{}", headers=text))[0] == 415
    assert (await call("DELETE", f"/v1/api-keys/{created['id']}"))[0] == 204
    assert (await call("DELETE", f"/v1/api-keys/{created['id']}"))[0] == 404
    assert (await call("POST", "/v1/events", json_body=EVENT, key=key))[0] == 401
