"""The API key store on a real Valkey: only a digest is kept, and the pepper behind it is
sealed, shared by every process and carried through a master-key rotation."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from tests.support.apikeys import redis_contents
from tests.support.replies import text
from webhook_service.crypto import MasterKeyError, SecretBox, generate_master_key
from webhook_service.embedded import EmbeddedValkey
from webhook_service.rekey import rotate_master_key
from webhook_service.store import keys
from webhook_service.store.apikeys import ApiKeyStore, reseal_pepper
from webhook_service.store.connect import async_client, sync_client

pytestmark = pytest.mark.integration


@pytest.fixture
async def client(valkey: EmbeddedValkey) -> AsyncIterator[Redis]:
    redis = async_client(valkey.url)
    await redis.flushall()
    yield redis
    await redis.aclose()


async def test_redis_holds_no_part_of_the_key(client: Redis) -> None:
    store = ApiKeyStore(client, SecretBox(generate_master_key()))
    record, key = await store.create("billing", ["events:write"], 2.5, 1_700_000_000_000)
    secret = key.rpartition("_")[2]
    dumped = repr(await redis_contents(client))
    assert record.id in dumped
    assert secret not in dumped
    assert secret[:16] not in dumped
    assert (await store.verify(key)) == record


async def test_a_wrong_secret_a_foreign_id_and_a_revoked_key_fail(client: Redis) -> None:
    store = ApiKeyStore(client, SecretBox(generate_master_key()))
    record, key = await store.create("k", ["admin"], None, 1_700_000_000_000)
    flipped = key[:-1] + ("0" if key[-1] != "0" else "1")
    assert await store.verify(flipped) is None
    other, _ = await store.create("other", ["admin"], None, 1_700_000_000_001)
    assert await store.verify(key.replace(record.id, other.id)) is None
    assert await store.delete(record.id)
    assert await store.verify(key) is None
    assert not await store.delete(record.id)


async def test_the_pepper_is_sealed_and_every_process_gets_the_same(client: Redis) -> None:
    box = SecretBox(generate_master_key())
    stores = [ApiKeyStore(client, box) for _ in range(8)]
    peppers = await asyncio.gather(*(s.pepper() for s in stores))
    assert len(set(peppers)) == 1
    assert len(peppers[0]) == 32
    sealed = text(await client.get(keys.API_KEY_PEPPER))
    assert sealed is not None and sealed.startswith(f"v2:{box.current_kid}:")
    _, key = await stores[0].create("k", ["admin"], None, 1_700_000_000_000)
    assert await stores[7].verify(key) is not None


async def test_keys_survive_a_master_key_rotation(client: Redis, valkey: EmbeddedValkey) -> None:
    old, new = generate_master_key(), generate_master_key()
    _, key = await ApiKeyStore(client, SecretBox(old)).create("k", ["admin"], None, 1)
    # Step 1 of the procedure: processes seal with the new key and still open the old.
    assert await ApiKeyStore(client, SecretBox(new, [old])).verify(key) is not None
    # Step 2: rotate-master-key re-seals the pepper along with the endpoint secrets.
    sync = sync_client(valkey.url)
    try:
        rotate_master_key(sync, SecretBox(old), SecretBox(new))
        assert not reseal_pepper(sync, SecretBox(old), SecretBox(new))  # done already
    finally:
        sync.close()
    resealed = text(await client.get(keys.API_KEY_PEPPER))
    assert resealed is not None and resealed.startswith(f"v2:{SecretBox(new).current_kid}:")
    # Step 3: the old master key gone for good, the key still works.
    assert await ApiKeyStore(client, SecretBox(new)).verify(key) is not None
    with pytest.raises(MasterKeyError):
        await ApiKeyStore(client, SecretBox(old)).verify(key)


async def test_no_pepper_yet_is_nothing_to_reseal(client: Redis, valkey: EmbeddedValkey) -> None:
    sync = sync_client(valkey.url)
    try:
        assert not reseal_pepper(
            sync, SecretBox(generate_master_key()), SecretBox(generate_master_key())
        )
    finally:
        sync.close()
    assert await client.get(keys.API_KEY_PEPPER) is None


async def test_pages_run_newest_first(client: Redis) -> None:
    store = ApiKeyStore(client, SecretBox(generate_master_key()))
    made = [
        (await store.create(f"k{n}", ["admin"], None, 1_700_000_000_000 + n))[0] for n in range(5)
    ]
    first, cursor = await store.page(3, None)
    rest, end = await store.page(3, cursor)
    assert [r.name for r in first + rest] == ["k4", "k3", "k2", "k1", "k0"]
    assert end is None
    assert first[0] == made[4]
