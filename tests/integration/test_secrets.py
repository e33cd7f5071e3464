"""Secrets in the service: rotation with a grace period, ed25519 endpoints, sealed at rest."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import redis
from standardwebhooks.webhooks import Webhook

from signer import Verifier
from tests.integration.conftest import Api, create_endpoint, send_event, wait_for
from tests.support.receiver import Received, Receiver
from tests.support.stack import Stack


def _verifies(secret: str, received: Received) -> bool:
    try:
        Webhook(secret).verify(received.body, received.headers)
    except Exception:
        return False
    return True


async def _deliver_one(api: Api, receiver: Receiver, name: str) -> Received:
    event_id = await send_event(api, "rotation.test", {"at": "now"})

    async def arrived() -> bool:
        return any(r.webhook_id == event_id for r in receiver.for_endpoint(name))

    await wait_for(arrived)
    return next(r for r in receiver.for_endpoint(name) if r.webhook_id == event_id)


# Long enough for one delivery on a busy machine to be signed within it.
GRACE_S = 8


async def test_rotation_grace_period_then_only_new_key(api: Api, receiver: Receiver) -> None:
    endpoint = await create_endpoint(api, receiver, "rot", ["rotation.test"])
    old = endpoint["secret"]
    status, rotated, _ = await api.call(
        "POST", f"/v1/endpoints/{endpoint['id']}/rotate-secret",
        json={"grace_period_seconds": GRACE_S},
    )  # fmt: skip
    assert status == 200, rotated
    new = rotated["secret"]
    assert new != old and len(rotated["previous_keys"]) == 1
    receiver.secrets["rot"].append(new)
    _, shown, _ = await api.call("GET", f"/v1/endpoints/{endpoint['id']}/secret")
    assert shown["secret"] == new

    during = await _deliver_one(api, receiver, "rot")
    assert _verifies(old, during) and _verifies(new, during)
    assert len(during.headers["webhook-signature"].split(" ")) == 2

    # Until the old key's grace is over, as the rotation said it would be.
    expires = datetime.fromisoformat(rotated["previous_keys"][0]["expires_at"])
    await asyncio.sleep(max(0.0, (expires - datetime.now(UTC)).total_seconds()) + 0.5)
    after = await _deliver_one(api, receiver, "rot")
    assert _verifies(new, after) and not _verifies(old, after)

    supplied = "whsec_" + "A" * 43 + "="
    status, body, _ = await api.call(
        "POST", f"/v1/endpoints/{endpoint['id']}/rotate-secret", json={"secret": supplied}
    )
    assert status == 200 and body["secret"] == supplied
    status, problem, _ = await api.call(
        "POST", f"/v1/endpoints/{endpoint['id']}/rotate-secret", json={"secret": "nope"}
    )
    assert status == 422 and problem["errors"][0]["pointer"] == "/secret"
    status, _, _ = await api.call(
        "POST", f"/v1/endpoints/{endpoint['id']}/rotate-secret",
        json={"grace_period_seconds": 604_801},
    )  # fmt: skip
    assert status == 422


async def test_ed25519_endpoint_signs_with_v1a(api: Api, receiver: Receiver) -> None:
    status, endpoint, _ = await api.call(
        "POST", "/v1/endpoints",
        json={"url": receiver.url("ed"), "event_types": ["rotation.test"], "signature": "ed25519"},
    )  # fmt: skip
    assert status == 201, endpoint
    api.created_endpoints.append(endpoint["id"])
    assert endpoint["secret"] is None and endpoint["public_key"].startswith("whpk_")
    event_id = await send_event(api, "rotation.test", {"signed": "ed25519"})

    async def arrived() -> bool:
        return any(r.webhook_id == event_id for r in receiver.for_endpoint("ed"))

    await wait_for(arrived)
    got = next(r for r in receiver.for_endpoint("ed") if r.webhook_id == event_id)
    assert got.headers["webhook-signature"].startswith("v1a,")
    assert Verifier([endpoint["public_key"]]).verify(got.body, got.headers) == got.body


async def test_no_secret_in_the_clear_in_aof_or_rdb(
    api: Api, receiver: Receiver, stack: Stack
) -> None:
    secrets = []
    for n in range(3):
        endpoint = await create_endpoint(api, receiver, f"sealed{n}", ["sealed.test"])
        secrets.append(endpoint["secret"])
        _, rotated, _ = await api.call("POST", f"/v1/endpoints/{endpoint['id']}/rotate-secret")
        secrets.append(rotated["secret"])
    client = redis.Redis.from_url(stack.valkey.url)
    client.save()  # an RDB snapshot beside the AOF
    client.bgrewriteaof()
    await asyncio.sleep(1.5)
    files = [p for p in Path(stack.valkey.directory).rglob("*") if p.is_file()]
    assert any(p.suffix == ".rdb" for p in files)
    assert any("aof" in p.name for p in files)
    blob = b"".join(p.read_bytes() for p in files)
    for secret in secrets:
        assert secret.encode() not in blob
        assert secret.removeprefix("whsec_").encode() not in blob
