"""endpoint_save.lua through EndpointStore.save, on a real Valkey: EndpointSaveArgs in,
SaveOutcome out (created, updated, limit_reached, no_app), and the endpoint, its sequence
number, its application's set and its subscriptions as the script leaves them."""

from __future__ import annotations

from dataclasses import replace

import pytest
from redis.asyncio import Redis

from tests.integration.store.tenants import new_app
from webhook_service.ids import mark_of, new_id, seq_tail
from webhook_service.store import keys
from webhook_service.store.applications import DEFAULT_APP_ID, DEFAULT_APP_UID, ApplicationStore
from webhook_service.store.endpoints import (
    ApplicationMissing,
    EndpointLimitReached,
    EndpointRecord,
    EndpointSaveArgs,
    EndpointStore,
    SaveOutcome,
    SealedSecret,
)
from webhook_service.store.scripts import Scripts
from webhook_service.timeutil import now_ms

pytestmark = pytest.mark.integration

ONE, TWO = "save.one", "save.two"


def _record(
    event_types: list[str] | None,
    *,
    operations: bool = False,
    application: str = DEFAULT_APP_ID,
    channels: list[str] | None = None,
) -> EndpointRecord:
    at = now_ms()
    return EndpointRecord(
        id=new_id("ep", at, mark=mark_of(application)), url="http://127.0.0.1:9/x",
        description="first",
        event_types=event_types, disabled=False, created_ms=at, updated_ms=at,
        secrets=[SealedSecret("v1:sealed")], operations=operations, application=application,
        channels=channels,
    )  # fmt: skip


def _subscribed(kind: str, app_id: str = DEFAULT_APP_ID) -> str:
    return keys.sub_type(app_id, kind)


def test_the_args_are_the_id_the_limit_the_application_then_the_field_pairs() -> None:
    args = EndpointSaveArgs("ep_1", 3, {"url": "http://x", "created": 5}, "app_1")
    assert args.argv() == ["ep_1", 3, "app_1", "url", "http://x", "created", 5]
    assert EndpointSaveArgs("ep_1", 0, {}).argv() == ["ep_1", 0, DEFAULT_APP_ID]
    assert args.keys() == [keys.endpoint("ep_1")]


async def test_a_new_endpoint_of_another_buckets_id_is_refused(client: Redis) -> None:
    app_id = await new_app(client, now_ms(), uid="bucket-nine")  # a bucket but 0
    record = _record([ONE], application=DEFAULT_APP_ID)
    with pytest.raises(ValueError, match="bucket"):
        await EndpointStore(client, Scripts(client)).save(
            replace(record, application=app_id), creating=True
        )
    assert not await client.exists(keys.endpoint(record.id))


async def test_a_new_endpoint_is_created_with_the_next_sequence_number(client: Redis) -> None:
    store = EndpointStore(client, Scripts(client))
    first, second = _record([ONE, TWO]), _record(None)
    assert await store.save(first, creating=True) is SaveOutcome.CREATED
    assert await store.save(second, creating=True) is SaveOutcome.CREATED

    raw = await client.hgetall(keys.endpoint(first.id))
    assert (raw["url"], raw["event_types"], raw["disabled"], raw["seq"], raw["app"]) == (
        "http://127.0.0.1:9/x", f'["{ONE}","{TWO}"]', "0", "1", DEFAULT_APP_ID,
    )  # fmt: skip
    assert raw["channels"] == ""
    assert await client.hget(keys.endpoint(second.id), "seq") == "2"
    assert await client.hgetall(keys.endpoint_seqs(0)) == {
        seq_tail(1): first.id, seq_tail(2): second.id,
    }  # fmt: skip
    for index in (keys.endpoints(0), keys.app_endpoints(DEFAULT_APP_ID)):
        assert set(await client.zrange(index, 0, -1, withscores=True)) == {
            (first.id, 0.0), (second.id, 0.0),
        }  # fmt: skip
    assert await client.smembers(_subscribed(ONE)) == {first.id}
    assert await client.smembers(_subscribed(TWO)) == {first.id}
    # No types: every type.
    assert await client.smembers(keys.sub_all(DEFAULT_APP_ID)) == {second.id}
    assert not await client.exists(keys.sub_ops())
    # The first endpoint of the default application made it.
    made = await ApplicationStore(client, Scripts(client)).get(DEFAULT_APP_ID)
    assert made is not None and made.uid == DEFAULT_APP_UID
    assert abs(made.created_ms - first.created_ms) < 60_000


async def test_an_endpoint_goes_into_its_application_with_its_channels(client: Redis) -> None:
    store = EndpointStore(client, Scripts(client))
    app_id = await new_app(client, now_ms())
    record = _record([ONE], application=app_id, channels=["b", "a", "b"])

    assert await store.save(record, creating=True) is SaveOutcome.CREATED

    raw = await client.hgetall(keys.endpoint(record.id))
    assert (raw["app"], raw["channels"]) == (app_id, '["a","b"]')
    assert await client.zrange(keys.app_endpoints(app_id), 0, -1) == [record.id]
    assert await client.smembers(_subscribed(ONE, app_id)) == {record.id}
    assert not await client.exists(_subscribed(ONE), keys.app(DEFAULT_APP_ID))
    got = await store.get(record.id)
    assert got is not None and (got.application, got.channels) == (app_id, ["a", "b"])
    page, cursor = await store.page(10, None, app_id)
    assert ([r.id for r in page], cursor) == ([record.id], None)
    assert await store.page(10, None, DEFAULT_APP_ID) == ([], None)

    # An update keeps it in its application, whatever it names; channels change.
    record.application, record.channels = DEFAULT_APP_ID, None
    assert await store.save(record, creating=False) is SaveOutcome.UPDATED
    raw = await client.hgetall(keys.endpoint(record.id))
    assert (raw["app"], raw["channels"]) == (app_id, "")
    assert await client.smembers(_subscribed(ONE, app_id)) == {record.id}


async def test_a_new_endpoint_of_no_application_is_refused_and_nothing_written(
    client: Redis,
) -> None:
    scripts = Scripts(client)
    missing = new_id("app", now_ms(), mark=9)
    record = _record([ONE], application=missing)

    with pytest.raises(ApplicationMissing):
        await EndpointStore(client, scripts).save(record, creating=True)
    args = EndpointSaveArgs(record.id, 0, {"url": record.url, "event_types": ""}, missing)
    assert await scripts.run("endpoint_save", args.keys(), args.argv()) == SaveOutcome.NO_APP
    assert await client.dbsize() == 0


async def test_an_update_moves_the_subscriptions_and_keeps_the_sequence_number(
    client: Redis,
) -> None:
    store = EndpointStore(client, Scripts(client))
    record = _record([ONE])
    assert await store.save(record, creating=True) is SaveOutcome.CREATED

    record.event_types, record.operations, record.description = [TWO], True, "second"
    record.secrets = [SealedSecret("v1:not-written")]
    assert await store.save(record, creating=False) is SaveOutcome.UPDATED
    raw = await client.hgetall(keys.endpoint(record.id))
    assert (raw["description"], raw["operations"], raw["seq"]) == ("second", "1", "1")
    assert raw["secrets"] == '[{"k":"v1:sealed","exp":null}]'  # only creation writes them
    assert await client.get(keys.endpoint_seq(0)) == "1"
    assert not await client.exists(_subscribed(ONE))
    assert await client.smembers(_subscribed(TWO)) == {record.id}
    assert await client.smembers(keys.sub_ops()) == {record.id}

    record.event_types, record.operations = None, False
    assert await store.save(record, creating=False) is SaveOutcome.UPDATED
    assert not await client.exists(_subscribed(TWO), keys.sub_ops())
    assert await client.smembers(keys.sub_all(DEFAULT_APP_ID)) == {record.id}


async def test_past_its_applications_limit_a_new_endpoint_is_refused_and_nothing_written(
    client: Redis,
) -> None:
    scripts = Scripts(client)
    store = EndpointStore(client, scripts)
    kept = _record([ONE])
    assert await store.save(kept, creating=True, max_endpoints=1) is SaveOutcome.CREATED

    refused = _record([TWO])
    with pytest.raises(EndpointLimitReached):
        await store.save(refused, creating=True, max_endpoints=1)
    # The script's own answer, for the same arguments.
    args = EndpointSaveArgs(refused.id, 1, {"url": refused.url, "event_types": ""})
    assert await scripts.run("endpoint_save", args.keys(), args.argv()) == (
        SaveOutcome.LIMIT_REACHED
    )
    assert not await client.exists(
        keys.endpoint(refused.id), _subscribed(TWO), keys.sub_all(DEFAULT_APP_ID)
    )
    assert await client.zrange(keys.endpoints(0), 0, -1) == [kept.id]
    assert await client.get(keys.endpoint_seq(0)) == "1"

    # The limit is each application's: another one's first endpoint is taken.
    other = await new_app(client, now_ms())
    elsewhere = _record([TWO], application=other)
    assert await store.save(elsewhere, creating=True, max_endpoints=1) is SaveOutcome.CREATED
    assert elsewhere.id in await client.zrange(keys.endpoints(keys.bucket_of(other)), 0, -1)
    assert await client.zcard(keys.app_endpoints(other)) == 1

    # Changing an endpoint adds none: at the limit it still works.
    kept.description = "changed"
    assert await store.save(kept, creating=False, max_endpoints=1) is SaveOutcome.UPDATED
    assert await client.hget(keys.endpoint(kept.id), "description") == "changed"
