"""Applications: the tenants. Each holds its own endpoints, subscriptions, events and
idempotency records, its ingest rate limit and its endpoint quota (keys.py names the keys).

An id is ``app_…`` (``new_id("app", now)``); a uid, the producer's own name for its
customer, never starts with ``app_``, so a path segment is told to be one or the other by
its look alone (``is_app_id``). The default application (``DEFAULT_APP_ID``) is where a
single-tenant deployment lives: the scripts create it on its first use (ingest, endpoint
save, ``ApplicationStore.ensure_default``) and its uid is reserved to it.

Creation and update are one step each of ``lua/app_save.lua`` (``AppSaveArgs`` in,
``ApplicationOutcome`` out), atomic with the uid's mapping: two applications never hold the
same uid, and a uid let go of is free at once."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, cast

import orjson
from redis.asyncio import Redis
from redis.exceptions import WatchError

from webhook_service.store import keys
from webhook_service.store.paging import newest_first
from webhook_service.timeutil import now_ms

if TYPE_CHECKING:
    # scripts.py reads the default application's names from here for its preamble.
    from webhook_service.store.scripts import Scripts

ID_PREFIX = "app"
DEFAULT_APP_ID = "app_default"
DEFAULT_APP_UID = "default"
DEFAULT_APP_NAME = "default"


def is_app_id(text: str) -> bool:
    """Whether a path segment is an application id rather than a uid."""
    return text.startswith(ID_PREFIX + "_")


@dataclass(frozen=True)
class NewApplication:
    """An application to create, if it is missing, in the step that stores an event
    (``IngestArgs.create_app``): the producer needs no provisioning call."""

    id: str
    uid: str | None
    name: str


DEFAULT_APPLICATION = NewApplication(DEFAULT_APP_ID, DEFAULT_APP_UID, DEFAULT_APP_NAME)


@dataclass(frozen=True)
class ApplicationRecord:
    id: str
    name: str
    uid: str | None
    metadata: dict[str, str]
    rate_limit: float | None  # events per second on ingest, across every API process
    created_ms: int
    updated_ms: int


class ApplicationOutcome(StrEnum):
    """What app_save.lua answers; nothing is written but for CREATED and UPDATED."""

    CREATED = "created"
    UPDATED = "updated"
    UID_TAKEN = "uid_taken"  # another application holds the uid (or it is the default's)
    MISSING = "missing"  # update: no such application
    # create: an application with this id exists already (a new id never meets it; the
    # default application's creation does when another process made it first)
    EXISTS = "exists"


class AppSaveMode(StrEnum):
    CREATE = "create"
    UPDATE = "update"


@dataclass(frozen=True)
class AppSaveArgs:
    """app_save.lua's arguments, in the order its head names them."""

    mode: AppSaveMode
    app_id: str
    name: str
    uid: str | None
    metadata: dict[str, str]
    rate_limit: float | None
    created_ms: int  # only a creation writes it
    updated_ms: int

    @classmethod
    def of(cls, mode: AppSaveMode, record: ApplicationRecord) -> AppSaveArgs:
        return cls(
            mode, record.id, record.name, record.uid, record.metadata, record.rate_limit,
            record.created_ms, record.updated_ms,
        )  # fmt: skip

    def argv(self) -> list[str | int | float]:
        return [
            self.mode.value,
            self.app_id,
            self.name,
            self.uid or "",
            orjson.dumps(self.metadata).decode() if self.metadata else "",
            "" if self.rate_limit is None else repr(self.rate_limit),
            self.created_ms,
            self.updated_ms,
        ]


def _from_hash(app_id: str, raw: dict[str, str]) -> ApplicationRecord:
    return ApplicationRecord(
        id=app_id,
        name=raw["name"],
        uid=raw["uid"] or None,
        metadata=cast(dict[str, str], orjson.loads(raw["metadata"])) if raw["metadata"] else {},
        rate_limit=float(raw["rate_limit"]) if raw["rate_limit"] else None,
        created_ms=int(raw["created"]),
        updated_ms=int(raw["updated"]),
    )


class DefaultApplicationRefused(RuntimeError):
    """The default application could not be created (app_save.lua answered otherwise)."""


class ApplicationStore:
    def __init__(self, redis: Redis, scripts: Scripts) -> None:
        self._redis = redis
        self._scripts = scripts

    async def _save(self, mode: AppSaveMode, record: ApplicationRecord) -> ApplicationOutcome:
        args = AppSaveArgs.of(mode, record)
        return ApplicationOutcome(await self._scripts.run("app_save", args.argv()))

    async def create(self, record: ApplicationRecord) -> ApplicationOutcome:
        """CREATED, or UID_TAKEN (nothing written) when the uid is another's."""
        return await self._save(AppSaveMode.CREATE, record)

    async def update(self, record: ApplicationRecord) -> ApplicationOutcome:
        """UPDATED (its created time is kept), or, nothing written, UID_TAKEN or MISSING.
        A uid changed or dropped is free for another application at once."""
        return await self._save(AppSaveMode.UPDATE, record)

    async def get(self, app_id: str) -> ApplicationRecord | None:
        raw = cast(dict[str, str], await self._redis.hgetall(keys.app(app_id)))
        return _from_hash(app_id, raw) if raw else None

    async def id_of_uid(self, uid: str) -> str | None:
        found = await self._redis.hget(keys.APPS_UID, uid)
        return None if found is None else str(found)

    async def resolve(self, id_or_uid: str) -> ApplicationRecord | None:
        """The application an id (app_…) or else a uid names."""
        if is_app_id(id_or_uid):
            return await self.get(id_or_uid)
        app_id = await self.id_of_uid(id_or_uid)
        return None if app_id is None else await self.get(app_id)

    async def page(
        self, limit: int, cursor: str | None, uid: str | None = None
    ) -> tuple[list[ApplicationRecord], str | None]:
        """Newest first; the cursor is the last id of the previous page. With ``uid``, the
        one application that holds it, if any (and if it is past the cursor)."""
        if uid is not None:
            app_id = await self.id_of_uid(uid)
            found = None if app_id is None else await self.get(app_id)
            if found is None or (cursor is not None and found.id >= cursor):
                return [], None
            return [found], None
        rows, next_cursor = await newest_first(self._redis, keys.APPS, keys.app(""), limit, cursor)
        return [_from_hash(app_id, raw) for app_id, raw in rows], next_cursor

    async def endpoint_count(self, app_id: str) -> int:
        """What WEBHOOK_MAX_ENDPOINTS_PER_APP limits (endpoint_save.lua counts the same)."""
        return int(await self._redis.zcard(keys.app_endpoints(app_id)))

    async def ensure_default(self) -> ApplicationRecord:
        """The default application, created now if it is missing."""
        found = await self.get(DEFAULT_APP_ID)
        if found is not None:
            return found
        at = now_ms()
        record = ApplicationRecord(
            DEFAULT_APP_ID, DEFAULT_APP_NAME, DEFAULT_APP_UID, {}, None, at, at
        )
        outcome = await self.create(record)
        if outcome not in (ApplicationOutcome.CREATED, ApplicationOutcome.EXISTS):
            raise DefaultApplicationRefused(outcome)
        made = await self.get(DEFAULT_APP_ID)
        if made is None:
            raise DefaultApplicationRefused("deleted as soon as it was made")
        return made

    async def delete(self, app_id: str) -> bool:
        """The application's record, its uid's mapping, its place in ``apps`` and its rate
        limiter gone; False when there was no such application. Its endpoints are not
        touched: whoever deletes an application deletes them first."""
        key = keys.app(app_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            while True:
                try:
                    await pipe.watch(key, keys.APPS_UID)
                    uid = await pipe.hget(key, "uid")
                    if uid is None:
                        return False
                    holder = await pipe.hget(keys.APPS_UID, uid) if uid else None
                    pipe.multi()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
                    pipe.delete(key, keys.app_limit(app_id))
                    pipe.zrem(keys.APPS, app_id)
                    if holder == app_id:
                        pipe.hdel(keys.APPS_UID, uid)
                    await pipe.execute()
                    return True
                except WatchError:
                    continue
