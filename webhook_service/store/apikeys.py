"""API keys, kept only as an HMAC of the key: Redis never holds anything a caller could send.

A key reads ``whk_<id>_<secret>``. The id is public (it names the key in listings and
idempotency windows) and finds the record in one lookup; the secret is 192 random bits.
The record holds HMAC-SHA256(pepper, whole key), compared in constant time.

The pepper is 32 random bytes made once per deployment and stored in Redis sealed with the
master key (the same AES-GCM ``SecretBox`` as endpoint secrets). So a copy of Redis alone
cannot even confirm a guessed key, the master key alone opens nothing, and, unlike a pepper
derived from the master key, it survives a master-key rotation: ``rotate-master-key``
re-seals it with the endpoint secrets (``reseal_pepper``), the keys themselves unchanged.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import redis
from redis.asyncio import Redis

from webhook_service.crypto import SecretBox
from webhook_service.ids import looks_like, new_id
from webhook_service.store import keys
from webhook_service.store.paging import newest_first

KEY_PREFIX = "whk_"
ID_PREFIX = "key"
_SECRET = re.compile(r"[0-9a-f]{48}")
# Associated data for the sealed pepper: a sealed endpoint secret pasted here will not open.
_PEPPER_AD = "api-key-pepper"


@dataclass(frozen=True)
class ApiKeyRecord:
    id: str
    name: str
    scopes: tuple[str, ...]
    rate_limit: float | None  # events per second on ingest; None: unlimited
    created_ms: int
    # The one application the key sees and acts on; None: every one (the operator's).
    application: str | None = None


def parse_key(presented: str) -> str | None:
    """The id inside a well-formed key, or None: nothing else is worth a Redis lookup."""
    if not presented.startswith(KEY_PREFIX):
        return None
    key_id, _, secret = presented[len(KEY_PREFIX) :].rpartition("_")
    if not looks_like(key_id, ID_PREFIX) or _SECRET.fullmatch(secret) is None:
        return None
    return key_id


def digest(pepper: bytes, key: str) -> str:
    return hmac.new(pepper, key.encode(), hashlib.sha256).hexdigest()


def _from_hash(key_id: str, raw: dict[str, str]) -> ApiKeyRecord:
    rate = raw.get("rate_limit", "")
    return ApiKeyRecord(
        id=key_id,
        name=raw.get("name", ""),
        scopes=tuple(s for s in raw.get("scopes", "").split(",") if s),
        rate_limit=float(rate) if rate else None,
        created_ms=int(raw["created"]),
        application=raw.get("application") or None,
    )


def reseal_pepper(client: redis.Redis, old: SecretBox, new: SecretBox) -> bool:
    """Re-seal the pepper under ``new``'s current key (master-key rotation); False when
    there is no pepper yet or it is sealed so already."""
    sealed = cast(str | None, client.get(keys.API_KEY_PEPPER))
    if sealed is None or new.sealed_with_current(sealed):
        return False
    # Only a rotation rewrites it, and the plain pepper never changes: no race to guard.
    client.set(keys.API_KEY_PEPPER, new.seal(old.open(sealed, _PEPPER_AD), _PEPPER_AD))
    return True


class ApiKeyStore:
    def __init__(self, redis: Redis, box: SecretBox) -> None:
        self._redis = redis
        self._box = box
        self._pepper: bytes | None = None
        self._pepper_lock = asyncio.Lock()

    async def pepper(self) -> bytes:
        """The deployment's pepper, made by whichever process needs it first."""
        if self._pepper is None:
            async with self._pepper_lock:
                if self._pepper is None:
                    self._pepper = await self._load_pepper()
        return self._pepper

    async def _load_pepper(self) -> bytes:
        sealed = cast(str | None, await self._redis.get(keys.API_KEY_PEPPER))
        if sealed is None:
            fresh = base64.b64encode(os.urandom(32)).decode()
            await self._redis.set(keys.API_KEY_PEPPER, self._box.seal(fresh, _PEPPER_AD), nx=True)
            # Another process may have won the race: everyone uses what Redis kept.
            sealed = cast(str, await self._redis.get(keys.API_KEY_PEPPER))
        return base64.b64decode(self._box.open(sealed, _PEPPER_AD))

    async def create(
        self,
        name: str,
        scopes: Sequence[str],
        rate_limit: float | None,
        now_ms: int,
        application: str | None = None,
    ) -> tuple[ApiKeyRecord, str]:
        """A new key: its record, and the key itself, which only this caller ever sees."""
        key_id = new_id(ID_PREFIX, now_ms)
        key = f"{KEY_PREFIX}{key_id}_{secrets.token_hex(24)}"
        record = ApiKeyRecord(key_id, name, tuple(scopes), rate_limit, now_ms, application)
        pepper = await self.pepper()
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(
                keys.api_key(key_id),
                mapping={
                    "name": name,
                    "scopes": ",".join(scopes),
                    "rate_limit": repr(rate_limit) if rate_limit is not None else "",
                    "created": now_ms,
                    "digest": digest(pepper, key),
                    "application": application or "",
                },
            )
            pipe.zadd(keys.API_KEYS, {key_id: 0})
            await pipe.execute()
        return record, key

    async def verify(self, presented: str) -> ApiKeyRecord | None:
        """The record of a valid key; None for anything else, revoked keys included.

        Read from Redis on every call, never cached, so a revocation holds at once.
        """
        key_id = parse_key(presented)
        if key_id is None:
            return None
        pepper = await self.pepper()
        raw = cast(dict[str, str], await self._redis.hgetall(keys.api_key(key_id)))
        if not raw or not hmac.compare_digest(raw.get("digest", ""), digest(pepper, presented)):
            return None
        return _from_hash(key_id, raw)

    async def delete(self, key_id: str) -> bool:
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.delete(keys.api_key(key_id))
            pipe.zrem(keys.API_KEYS, key_id)
            removed, _ = await pipe.execute()
        return bool(removed)

    async def page(self, limit: int, cursor: str | None) -> tuple[list[ApiKeyRecord], str | None]:
        found, next_cursor = await newest_first(
            self._redis, keys.API_KEYS, keys.api_key, limit, cursor
        )
        return [_from_hash(key_id, raw) for key_id, raw in found], next_cursor
