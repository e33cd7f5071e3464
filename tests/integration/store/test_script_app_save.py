"""app_save.lua through ApplicationStore, on a real Valkey: AppSaveArgs in, ApplicationOutcome
out (created, updated, uid_taken, missing, exists), the record and its uid's mapping as the
script leaves them; and the rest of ApplicationStore (get, resolve, page, endpoint_count,
ensure_default, delete)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from redis.asyncio import Redis

from tests.integration.conftest import save_endpoint
from tests.support import buckets
from webhook_service.ids import new_id
from webhook_service.store import keys
from webhook_service.store.applications import (
    DEFAULT_APP_ID,
    DEFAULT_APP_NAME,
    DEFAULT_APP_UID,
    ApplicationOutcome,
    ApplicationRecord,
    ApplicationStore,
    AppSaveArgs,
    AppSaveMode,
    PortalOptions,
    is_app_id,
    new_app_id,
)
from webhook_service.store.scripts import Scripts

pytestmark = pytest.mark.integration

NOW = 1_800_000_000_000


def _app(uid: str | None = "acme", at: int = NOW) -> ApplicationRecord:
    return ApplicationRecord(new_app_id(at, uid), "Acme", uid, {"tier": "gold"}, 2.5, at, at)


def _store(client: Redis) -> ApplicationStore:
    return ApplicationStore(client, Scripts(client))


def test_the_args_are_the_mode_then_the_record_as_text() -> None:
    record = ApplicationRecord("app_1", "Acme", "acme", {"a": "b"}, 2.5, 5, 6)
    # The two flags: whether the uid, and the one an update drops, map in the application's
    # bucket ("app_1" is no time id: the default bucket, 0, as is the uid "default"'s).
    assert AppSaveArgs.of(AppSaveMode.UPDATE, record).argv() == [
        "update", "app_1", "Acme", "acme", '{"a":"b"}', "2.5", 5, 6, "0", "0", "",
    ]  # fmt: skip
    bare = ApplicationRecord("app_1", "Acme", None, {}, None, 5, 6)
    assert AppSaveArgs.of(AppSaveMode.UPDATE, bare, "default").argv() == [
        "update", "app_1", "Acme", "", "", "", 5, 6, "0", "1", "",
    ]  # fmt: skip
    made = ApplicationRecord(new_app_id(5, "acme"), "Acme", "acme", {}, None, 5, 6)
    assert AppSaveArgs.of(AppSaveMode.CREATE, made).argv()[-3:-1] == ["1", "0"]
    # Last, the portal's options as JSON, only what is set.
    framed = replace(made, portal=PortalOptions(("https://a.example",), accent="#112233"))
    assert AppSaveArgs.of(AppSaveMode.CREATE, framed).argv()[-1] == (
        '{"origins":["https://a.example"],"accent":"#112233"}'
    )
    assert AppSaveArgs.of(AppSaveMode.CREATE, made).keys() == [keys.app(made.id)]
    # A creation is one step: its id is of its uid's bucket, or it is refused.
    with pytest.raises(ValueError, match="new_app_id"):
        AppSaveArgs.of(AppSaveMode.CREATE, record)


def test_an_id_is_told_from_a_uid_by_its_look() -> None:
    assert is_app_id(new_id("app")) and is_app_id(DEFAULT_APP_ID)
    assert not is_app_id("acme") and not is_app_id("app-1") and not is_app_id("apps")


async def test_created_writes_the_record_its_uid_and_its_place_in_apps(client: Redis) -> None:
    store = _store(client)
    record = _app()

    assert await store.create(record) is ApplicationOutcome.CREATED

    assert await client.hgetall(keys.app(record.id)) == {
        "name": "Acme", "uid": "acme", "metadata": '{"tier":"gold"}', "rate_limit": "2.5",
        "created": str(NOW), "updated": str(NOW),
    }  # fmt: skip
    assert await buckets.uid_map(client) == {"acme": record.id}
    assert await client.zrange(keys.apps(keys.bucket_of(record.id)), 0, -1, withscores=True) == [
        (record.id, 0.0)
    ]
    assert await store.get(record.id) == record
    assert await store.resolve(record.id) == record
    assert await store.resolve("acme") == record
    assert await store.id_of_uid("acme") == record.id


async def test_an_application_without_uid_metadata_or_limit_round_trips(client: Redis) -> None:
    store = _store(client)
    record = replace(_app(None), metadata={}, rate_limit=None)
    assert await store.create(record) is ApplicationOutcome.CREATED
    assert await store.get(record.id) == record
    assert await buckets.uid_map(client) == {}


async def test_the_portals_options_round_trip_and_an_update_clears_them(client: Redis) -> None:
    store = _store(client)
    options = PortalOptions(
        ("https://a.example", "https://b.example:8443"), "Acme", None, "#aabbcc"
    )
    record = replace(_app(uid=None), portal=options)
    assert await store.create(record) is ApplicationOutcome.CREATED
    assert await store.get(record.id) == record
    assert await client.hget(keys.app(record.id), "portal") == (
        '{"origins":["https://a.example","https://b.example:8443"],"name":"Acme",'
        '"accent":"#aabbcc"}'
    )
    cleared = replace(record, portal=PortalOptions(), updated_ms=NOW + 1)
    assert await store.update(cleared) is ApplicationOutcome.UPDATED
    assert await store.get(record.id) == cleared
    assert not await client.hexists(keys.app(record.id), "portal")


async def test_a_uid_held_by_another_is_taken_and_nothing_written(client: Redis) -> None:
    store = _store(client)
    first = _app()
    assert await store.create(first) is ApplicationOutcome.CREATED
    size = await client.dbsize()

    second = _app(at=NOW + 1)
    assert await store.create(second) is ApplicationOutcome.UID_TAKEN
    assert not await client.exists(keys.app(second.id))
    assert await client.dbsize() == size
    assert await buckets.uid_map(client) == {"acme": first.id}


async def test_of_many_creations_with_one_uid_at_once_one_wins(client: Redis) -> None:
    store = _store(client)
    records = [_app(at=NOW + i) for i in range(20)]

    outcomes = await asyncio.gather(*(store.create(r) for r in records))

    assert sorted(outcomes) == sorted(
        [ApplicationOutcome.CREATED] + [ApplicationOutcome.UID_TAKEN] * 19
    )
    (winner,) = [r for r, o in zip(records, outcomes, strict=True) if o == "created"]
    assert await store.id_of_uid("acme") == winner.id
    assert len(await buckets.apps(client)) == 1


async def test_the_default_uid_is_the_default_applications_alone(client: Redis) -> None:
    store = _store(client)
    taker = _app(DEFAULT_APP_UID)
    # Even before the default application exists: the flat routes' application stays its.
    assert await store.create(taker) is ApplicationOutcome.UID_TAKEN
    other = _app()
    assert await store.create(other) is ApplicationOutcome.CREATED
    assert await store.update(replace(other, uid=DEFAULT_APP_UID)) is ApplicationOutcome.UID_TAKEN
    assert await store.id_of_uid(DEFAULT_APP_UID) is None


async def test_a_creation_of_an_id_that_exists_writes_nothing(client: Redis) -> None:
    store = _store(client)
    record = _app()
    assert await store.create(record) is ApplicationOutcome.CREATED
    again = replace(record, name="Other", uid=None)
    assert await store.create(again) is ApplicationOutcome.EXISTS
    assert await store.get(record.id) == record


async def test_an_update_rewrites_the_record_and_moves_its_uid(client: Redis) -> None:
    store = _store(client)
    record = _app()
    assert await store.create(record) is ApplicationOutcome.CREATED

    changed = replace(
        record, name="Acme Inc", uid="acme-inc", metadata={}, rate_limit=None,
        created_ms=NOW + 99, updated_ms=NOW + 100,
    )  # fmt: skip
    assert await store.update(changed) is ApplicationOutcome.UPDATED

    # Its created time is its own; the old uid is free for anyone at once.
    assert await store.get(record.id) == replace(changed, created_ms=NOW)
    assert await buckets.uid_map(client) == {"acme-inc": record.id}
    taker = _app(at=NOW + 1)
    assert await store.create(taker) is ApplicationOutcome.CREATED
    assert await store.id_of_uid("acme") == taker.id

    # Dropping the uid frees it too; keeping it is no conflict with itself.
    assert await store.update(replace(changed, uid=None)) is ApplicationOutcome.UPDATED
    assert await store.id_of_uid("acme-inc") is None
    assert await store.update(replace(taker, name="T")) is ApplicationOutcome.UPDATED


async def test_an_update_to_a_uid_another_holds_writes_nothing(client: Redis) -> None:
    store = _store(client)
    first, second = _app(), _app("beta", NOW + 1)
    for record in (first, second):
        assert await store.create(record) is ApplicationOutcome.CREATED

    assert await store.update(replace(second, uid="acme", name="x")) is (
        ApplicationOutcome.UID_TAKEN
    )
    assert await store.get(second.id) == second
    assert await buckets.uid_map(client) == {"acme": first.id, "beta": second.id}


async def test_an_update_of_no_application_is_missing(client: Redis) -> None:
    assert await _store(client).update(_app()) is ApplicationOutcome.MISSING
    assert await client.dbsize() == 0


async def test_an_unknown_mode_is_an_error(client: Redis) -> None:
    args = AppSaveArgs.of(AppSaveMode.CREATE, _app()).argv()
    with pytest.raises(Exception, match="unknown mode"):
        await Scripts(client).run("app_save", [keys.app(_app().id)], ["upsert", *args[1:]])


async def test_pages_list_newest_first_and_a_uid_finds_its_one(client: Redis) -> None:
    store = _store(client)
    made = [_app(f"u{i}", NOW + i) for i in range(5)]
    for record in made:
        assert await store.create(record) is ApplicationOutcome.CREATED

    first, cursor = await store.page(3, None)
    rest, end = await store.page(3, cursor)
    assert [r.id for r in first + rest] == [r.id for r in reversed(made)]
    assert cursor == made[2].id and end is None

    assert await store.page(10, None, uid="u1") == ([made[1]], None)
    assert await store.page(10, None, uid="nobody") == ([], None)
    assert await store.page(10, made[1].id, uid="u1") == ([], None)  # not past the cursor


async def test_the_endpoint_count_is_the_applications_own(client: Redis) -> None:
    store, scripts = _store(client), Scripts(client)
    other = _app()
    assert await store.create(other) is ApplicationOutcome.CREATED
    await save_endpoint(scripts, "count.one", NOW)
    await save_endpoint(scripts, "count.two", NOW + 1)
    assert await store.endpoint_count(DEFAULT_APP_ID) == 2
    assert await store.endpoint_count(other.id) == 0


async def test_ensure_default_creates_it_once(client: Redis) -> None:
    store = _store(client)
    made, again = await asyncio.gather(store.ensure_default(), store.ensure_default())
    assert made == again
    assert (made.id, made.name, made.uid, made.metadata, made.rate_limit) == (
        DEFAULT_APP_ID, DEFAULT_APP_NAME, DEFAULT_APP_UID, {}, None,
    )  # fmt: skip
    assert await store.resolve(DEFAULT_APP_UID) == made
    assert await buckets.apps(client) == [DEFAULT_APP_ID]


async def test_delete_takes_the_record_its_uid_and_its_limiter(client: Redis) -> None:
    store = _store(client)
    record, kept = _app(), _app("kept", NOW + 1)
    for made in (record, kept):
        assert await store.create(made) is ApplicationOutcome.CREATED
    await client.set(keys.app_limit(record.id), "1")

    assert await store.delete(record.id) is True
    assert not await client.exists(keys.app(record.id), keys.app_limit(record.id))
    assert await buckets.uid_map(client) == {"kept": kept.id}
    assert await buckets.apps(client) == [kept.id]
    assert await store.get(record.id) is None and await store.resolve("acme") is None
    assert await store.delete(record.id) is False
    # Its uid is anyone's now.
    assert await store.create(_app(at=NOW + 2)) is ApplicationOutcome.CREATED
