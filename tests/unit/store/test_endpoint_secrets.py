"""Sealed endpoint secrets and the endpoint record's round trip, with no Redis."""

from __future__ import annotations

from typing import Any, cast

import pytest
from redis.asyncio import Redis

from webhook_service.api.models import EndpointIn
from webhook_service.crypto import MasterKeyError, SecretBox, generate_master_key
from webhook_service.store import keys
from webhook_service.store.endpoints import (
    EndpointRecord,
    EndpointStore,
    SealedSecret,
    decode_headers,
    decode_secrets,
    encode_headers,
    encode_secrets,
    open_headers,
    open_secrets,
    seal_headers,
)
from webhook_service.store.scripts import Scripts

EP = "ep_01JDZ0000000000000000000000"


@pytest.fixture
def box() -> SecretBox:
    return SecretBox(generate_master_key())


def test_encode_decode_round_trip() -> None:
    secrets = [SealedSecret("v1:aaa"), SealedSecret("v1:bbb", 1_700_000_000_000)]
    assert decode_secrets(encode_secrets(secrets)) == secrets


def test_decoding_nothing_gives_no_secrets() -> None:
    assert decode_secrets("") == []
    assert decode_secrets("[]") == []


def test_open_secrets_keeps_current_and_unexpired_in_order(box: SecretBox) -> None:
    now = 1_000_000
    text = encode_secrets(
        [
            SealedSecret(box.seal("current", EP)),
            SealedSecret(box.seal("grace", EP), now + 1),
            SealedSecret(box.seal("expired", EP), now),
            SealedSecret(box.seal("long-gone", EP), 0),
        ]
    )
    assert open_secrets(box, EP, text, now)[0] == ["current", "grace"]


def test_open_secrets_refuses_another_endpoints_secret(box: SecretBox) -> None:
    text = encode_secrets([SealedSecret(box.seal("s", "ep_other"))])
    with pytest.raises(MasterKeyError):
        open_secrets(box, EP, text, 0)


def test_header_values_are_sealed_and_open_again(box: SecretBox) -> None:
    plain = {"Authorization": "Bearer rcv-token", "X-Tenant": "acme"}
    stored = encode_headers(seal_headers(box, EP, plain))
    assert "rcv-token" not in stored and "acme" not in stored
    assert list(decode_headers(stored)) == ["Authorization", "X-Tenant"]  # names readable
    assert open_headers(box, EP, decode_headers(stored)) == plain


def test_a_sealed_header_value_opens_only_where_it_was_sealed(box: SecretBox) -> None:
    """Else someone who can write to Redis, but has no master key, could have the worker
    send an endpoint's signing key to its receiver as a header."""
    [token] = seal_headers(box, EP, {"Authorization": "Bearer t"}).values()
    for elsewhere in ({"X-Debug": token}, {"Authorization": box.seal("whsec_x", EP)}):
        with pytest.raises(MasterKeyError):
            open_headers(box, EP, elsewhere)
    with pytest.raises(MasterKeyError):
        open_headers(box, "ep_other", {"Authorization": token})
    with pytest.raises(MasterKeyError):
        open_secrets(box, EP, encode_secrets([SealedSecret(token)]), 0)


class _FakeScripts:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[Any]]] = []

    async def run(self, name: str, script_keys: list[str], args: list[Any]) -> Any:
        self.calls.append((name, args))
        return "created"  # endpoint_save.lua's answer for a new endpoint


class _FakeRedis:
    """Just enough of redis.asyncio.Redis for EndpointStore.get."""

    def __init__(self) -> None:
        self.hashes: dict[str, dict[str, str]] = {}

    async def hgetall(self, key: str) -> dict[str, str]:
        return dict(self.hashes.get(key, {}))


def _store(redis: _FakeRedis, scripts: _FakeScripts) -> EndpointStore:
    # Casts: EndpointStore takes the concrete client and Scripts (no Protocol), and save and
    # get call only the run and hgetall these fakes have.
    return EndpointStore(cast(Redis, redis), cast(Scripts, scripts))


async def _saved_fields(record: EndpointRecord, *, creating: bool = True) -> dict[str, str]:
    """The field/value pairs save() hands the endpoint_save script."""
    scripts = _FakeScripts()
    await _store(_FakeRedis(), scripts).save(record, creating=creating)
    [(name, args)] = scripts.calls
    assert name == "endpoint_save"
    assert args[:3] == [record.id, 0, record.application]  # no limit on endpoints
    pairs = args[3:]
    return {str(k): str(v) for k, v in zip(pairs[::2], pairs[1::2], strict=True)}


async def _round_trip(record: EndpointRecord) -> EndpointRecord:
    """Save through the endpoint_save arguments, read back through get()."""
    redis = _FakeRedis()
    # A new endpoint's application is the script's to write, from its own argument.
    fields = await _saved_fields(record)
    redis.hashes[keys.endpoint(record.id)] = {**fields, "app": record.application}
    got = await _store(redis, _FakeScripts()).get(record.id)
    assert got is not None
    return got


def _record(event_types: list[str] | None, box: SecretBox) -> EndpointRecord:
    return EndpointRecord(
        id=EP,
        url="https://receiver.example.com/hook",
        description="d",
        event_types=event_types,
        disabled=False,
        created_ms=1,
        updated_ms=2,
        secrets=[SealedSecret(box.seal("whsec_x", EP))],
    )


@pytest.mark.parametrize("event_types", [None, ["a"], ["a.b", "c"]])
async def test_an_endpoint_round_trips_through_the_store(
    box: SecretBox, event_types: list[str] | None
) -> None:
    record = _record(event_types, box)
    assert await _round_trip(record) == record


async def test_an_update_leaves_secrets_and_the_enabled_state_alone(box: SecretBox) -> None:
    record = _record(["a"], box)
    created = await _saved_fields(record, creating=True)
    assert "secrets" in created and created["disabled"] == "0"
    updated = await _saved_fields(record, creating=False)
    assert "secrets" not in updated and "disabled" not in updated


async def test_headers_rate_limit_and_operations_round_trip(box: SecretBox) -> None:
    record = _record(None, box)
    record.sealed_headers = seal_headers(box, EP, {"X-Tenant": "acme", "Authorization": "t"})
    record.rate_limit = 2.5
    record.operations = True
    assert await _round_trip(record) == record


async def test_the_application_and_channels_round_trip(box: SecretBox) -> None:
    record = _record(["a"], box)
    record.application, record.channels = "app_01JDZ0000000000000000000000", ["x", "y"]
    assert await _round_trip(record) == record
    record.channels = None
    assert await _round_trip(record) == record


async def test_saved_channels_are_sorted_and_unique(box: SecretBox) -> None:
    record = _record(None, box)
    assert (await _saved_fields(record))["channels"] == ""
    record.channels = ["b", "a", "b"]
    assert (await _saved_fields(record))["channels"] == '["a","b"]'


async def test_an_endpoint_created_disabled_says_why(box: SecretBox) -> None:
    record = _record(None, box)
    record.disabled = True
    fields = await _saved_fields(record)
    assert (fields["disabled"], fields["disabled_reason"]) == ("1", "manual")
    assert fields["disabled_at"] == str(record.created_ms)


async def test_saved_event_types_are_sorted_and_unique(box: SecretBox) -> None:
    fields = await _saved_fields(_record(["b", "a", "b"], box))
    assert fields["event_types"] == '["a","b"]'
    assert (await _saved_fields(_record(None, box)))["event_types"] == ""


async def test_an_empty_event_type_list_is_refused_or_kept_empty(box: SecretBox) -> None:
    try:
        body = EndpointIn(url="https://receiver.example.com/hook", event_types=[])
    except ValueError:
        return  # refused at the API: fine
    assert body.event_types == []
    stored = await _round_trip(_record(body.event_types, box))
    assert stored.event_types == []  # not None, which means "every type"
