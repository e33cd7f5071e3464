"""Applications: the tenants. Each holds its own endpoints, subscriptions, events and
idempotency records, its ingest rate limit and its endpoint quota (keys.py names the keys).

An id is ``app_…`` (``new_app_id(now, uid)``); a uid, the producer's own name for its
customer, never starts with ``app_``, so a path segment is told to be one or the other by
its look alone (``is_app_id``). The default application (``DEFAULT_APP_ID``) is where a
single-tenant deployment lives: the scripts create it on its first use (ingest, endpoint
save, ``ApplicationStore.ensure_default``) and its uid is reserved to it.

Creation and update are one step each of ``lua/app_save.lua`` (``AppSaveArgs`` in,
``ApplicationOutcome`` out), atomic with the uid's mapping: two applications never hold the
same uid, and a uid let go of is free at once.

Keys ready for a cluster (keys.py): an application's keys are of its bucket, and a uid's
mapping of the uid's bucket (``keys.uid_bucket``). An application created with a uid is
made in that bucket (``new_app_id``), so creating both, by ingest or by app_save.lua, is one
step. An update to a uid of another bucket is three: the uid is claimed in its bucket (a
compare-and-set on that one hash, ``_claim``), the application saved, then the uid it had
let go of in its own bucket; deleting one lets its uid go before its record. A step cut
short between these leaves a mapping naming an application that does not hold the uid (or
is gone): ``resolve`` reads it as none, and a later claim of the uid takes it over after
reading the holder's record. Only ``id_of_uid`` (ingest's one read) does not check; it
meets such a mapping only in the moment a process dies mid-update."""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any, cast

import orjson
from redis.asyncio import Redis
from redis.exceptions import WatchError

from webhook_service.ids import new_id, random_mark, uid_mark
from webhook_service.store import keys
from webhook_service.store.paging import newest_first_of
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


def new_app_id(now: int, uid: str | None = None) -> str:
    """A new application's id: of its uid's mark, so that the application and its uid's
    mapping are of one bucket, or of a random one (the applications spread over the
    buckets, and so over a cluster's primaries)."""
    if not uid:
        return new_id(ID_PREFIX, now, mark=random_mark())
    # The default application's uid maps in its bucket (keys.uid_bucket): taken, anyway.
    return new_id(ID_PREFIX, now, mark=0 if uid == DEFAULT_APP_UID else uid_mark(uid))


@dataclass(frozen=True)
class NewApplication:
    """An application to create, if it is missing, in the step that stores an event
    (``IngestArgs.create_app``): the producer needs no provisioning call."""

    id: str
    uid: str | None
    name: str


DEFAULT_APPLICATION = NewApplication(DEFAULT_APP_ID, DEFAULT_APP_UID, DEFAULT_APP_NAME)


@dataclass(frozen=True)
class PortalOptions:
    """How the application's subscriber portal looks and where it may be framed (the API
    checks each: https origins, an https logo, a #rrggbb accent). None / (): not set."""

    # Origins (https://host[:port]) whose pages may frame the portal: its CSP
    # frame-ancestors, and SameSite=None for its cookie over HTTPS (portal/session.py).
    origins: tuple[str, ...] = ()
    name: str | None = None  # shown instead of the application's name
    logo_url: str | None = None
    accent: str | None = None

    def to_json(self) -> str:
        """The record's ``portal`` field; '' when nothing is set (then no field at all)."""
        fields = {
            "origins": list(self.origins) or None,
            "name": self.name,
            "logo_url": self.logo_url,
            "accent": self.accent,
        }
        given = {k: v for k, v in fields.items() if v is not None}
        return orjson.dumps(given).decode() if given else ""

    @classmethod
    def from_json(cls, text: str | None) -> PortalOptions:
        if not text:
            return cls()
        fields = cast(dict[str, Any], orjson.loads(text))
        return cls(
            tuple(fields.get("origins") or ()),
            fields.get("name"),
            fields.get("logo_url"),
            fields.get("accent"),
        )


@dataclass(frozen=True)
class ApplicationRecord:
    id: str
    name: str
    uid: str | None
    metadata: dict[str, str]
    rate_limit: float | None  # events per second on ingest, across every API process
    created_ms: int
    updated_ms: int
    portal: PortalOptions = PortalOptions()


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
    # Update: the uid it had, whose mapping the script drops when it is of this bucket.
    old_uid: str | None = None
    portal: PortalOptions = PortalOptions()

    @classmethod
    def of(
        cls, mode: AppSaveMode, record: ApplicationRecord, old_uid: str | None = None
    ) -> AppSaveArgs:
        return cls(
            mode, record.id, record.name, record.uid, record.metadata, record.rate_limit,
            record.created_ms, record.updated_ms, old_uid, record.portal,
        )  # fmt: skip

    def __post_init__(self) -> None:
        if self.mode is AppSaveMode.CREATE and self.uid and not _here(self.app_id, self.uid):
            raise ValueError(f"{self.app_id} is not of its uid's bucket: use new_app_id")

    def keys(self) -> list[str]:
        return [keys.app(self.app_id)]

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
            "1" if self.uid and _here(self.app_id, self.uid) else "0",
            "1" if self.old_uid and _here(self.app_id, self.old_uid) else "0",
            self.portal.to_json(),
        ]


def _here(app_id: str, uid: str) -> bool:
    """Whether the uid's mapping is of the application's bucket."""
    return keys.uid_bucket(uid) == keys.bucket_of(app_id)


def _from_hash(app_id: str, raw: dict[str, str]) -> ApplicationRecord:
    return ApplicationRecord(
        id=app_id,
        name=raw["name"],
        uid=raw["uid"] or None,
        metadata=cast(dict[str, str], orjson.loads(raw["metadata"])) if raw["metadata"] else {},
        rate_limit=float(raw["rate_limit"]) if raw["rate_limit"] else None,
        created_ms=int(raw["created"]),
        updated_ms=int(raw["updated"]),
        portal=PortalOptions.from_json(raw.get("portal")),
    )


class DefaultApplicationRefused(RuntimeError):
    """The default application could not be created (app_save.lua answered otherwise)."""


class ApplicationStore:
    def __init__(self, redis: Redis, scripts: Scripts) -> None:
        self._redis = redis
        self._scripts = scripts

    async def _save(self, args: AppSaveArgs) -> ApplicationOutcome:
        return ApplicationOutcome(await self._scripts.run("app_save", args.keys(), args.argv()))

    async def create(self, record: ApplicationRecord) -> ApplicationOutcome:
        """CREATED, or UID_TAKEN (nothing written) when the uid is another's. An id with a
        uid is of the uid's bucket (``new_app_id``): one step. A mapping of the uid left by
        a step cut short (``_stale``) is cleared first."""
        outcome = await self._save(AppSaveArgs.of(AppSaveMode.CREATE, record))
        if outcome is ApplicationOutcome.UID_TAKEN and record.uid and await self._stale(record.uid):
            outcome = await self._save(AppSaveArgs.of(AppSaveMode.CREATE, record))
        return outcome

    async def update(self, record: ApplicationRecord) -> ApplicationOutcome:
        """UPDATED (its created time is kept), or, nothing written, UID_TAKEN or MISSING.
        A uid changed or dropped is free for another application at once."""
        found = await self.get(record.id)
        if found is None:
            return ApplicationOutcome.MISSING
        old, new = found.uid, record.uid
        elsewhere = bool(new) and new != old and not _here(record.id, cast(str, new))
        if elsewhere and not await self._claim(cast(str, new), record.id):
            return ApplicationOutcome.UID_TAKEN
        outcome = await self._save(AppSaveArgs.of(AppSaveMode.UPDATE, record, old))
        if elsewhere:
            uid = cast(str, new)
            if outcome is not ApplicationOutcome.UPDATED:
                await self._let_go(uid, record.id)
                return outcome
            if await self._redis.hget(keys.apps_uid(uid), uid) != record.id:
                # Another update took the uid over between the claim and the save (it read
                # this one's record without it): the application keeps the one it had.
                await self._save(AppSaveArgs.of(AppSaveMode.UPDATE, replace(record, uid=old)))
                return ApplicationOutcome.UID_TAKEN
        if (
            outcome is ApplicationOutcome.UPDATED
            and old
            and old != new
            and not _here(record.id, old)
        ):
            await self._let_go(old, record.id)
        return outcome

    async def _claim(self, uid: str, app_id: str) -> bool:
        """Map ``uid`` (of another bucket) to ``app_id`` unless another application holds
        it: one that does not hold it by its own record (a step cut short left it, or it is
        gone) is taken over. A compare-and-set on the one hash."""
        key = keys.apps_uid(uid)
        async with self._redis.pipeline(transaction=True) as pipe:
            while True:
                try:
                    await pipe.watch(key)
                    holder = await pipe.hget(key, uid)
                    if holder not in (None, app_id) and await self._holds(str(holder), uid):
                        return False
                    if uid == DEFAULT_APP_UID and app_id != DEFAULT_APP_ID:
                        return False  # the default application's, even before it exists
                    pipe.multi()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
                    pipe.hset(key, uid, app_id)
                    await pipe.execute()
                    return True
                except WatchError:
                    continue

    async def _let_go(self, uid: str, app_id: str) -> None:
        """Drop ``uid``'s mapping if it still names ``app_id`` (compare-and-delete)."""
        key = keys.apps_uid(uid)
        async with self._redis.pipeline(transaction=True) as pipe:
            while True:
                try:
                    await pipe.watch(key)
                    if await pipe.hget(key, uid) != app_id:
                        return
                    pipe.multi()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
                    pipe.hdel(key, uid)
                    await pipe.execute()
                    return
                except WatchError:
                    continue

    async def _holds(self, app_id: str, uid: str) -> bool:
        return await self._redis.hget(keys.app(app_id), "uid") == uid

    async def _stale(self, uid: str) -> bool:
        """Whether the uid's mapping names an application that does not hold it; if so, it
        is dropped (and the uid free)."""
        holder = await self.id_of_uid(uid)
        if holder is None or await self._holds(holder, uid):
            return False
        await self._let_go(uid, holder)
        return True

    async def get(self, app_id: str) -> ApplicationRecord | None:
        raw = cast(dict[str, str], await self._redis.hgetall(keys.app(app_id)))
        return _from_hash(app_id, raw) if raw else None

    async def id_of_uid(self, uid: str) -> str | None:
        """The application the uid's mapping names (one read: ingest's), unchecked."""
        found = await self._redis.hget(keys.apps_uid(uid), uid)
        return None if found is None else str(found)

    async def resolve(self, id_or_uid: str) -> ApplicationRecord | None:
        """The application an id (app_…) or else a uid names: by a uid, one that holds it."""
        if is_app_id(id_or_uid):
            return await self.get(id_or_uid)
        app_id = await self.id_of_uid(id_or_uid)
        found = None if app_id is None else await self.get(app_id)
        return found if found is not None and found.uid == id_or_uid else None

    async def page(
        self, limit: int, cursor: str | None, uid: str | None = None
    ) -> tuple[list[ApplicationRecord], str | None]:
        """Newest first, across the buckets; the cursor is the last id of the previous
        page. With ``uid``, the one application that holds it, if any (and if it is past
        the cursor)."""
        if uid is not None:
            found = await self.resolve(uid) if not is_app_id(uid) else None
            if found is None or (cursor is not None and found.id >= cursor):
                return [], None
            return [found], None
        indexes = [keys.apps(b) for b in keys.all_buckets()]
        rows, next_cursor = await newest_first_of(self._redis, indexes, keys.app, limit, cursor)
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
        """The application's record, its uid's mapping, its place in its bucket's ``apps``
        and its rate limiter gone; False when there was no such application. A uid mapped in
        another bucket is let go of first: a deletion cut short between the two leaves the
        record, which the deletion job deletes again. Its endpoints are not touched:
        whoever deletes an application deletes them first."""
        key = keys.app(app_id)
        held = await self._redis.hget(key, "uid")
        if held and not _here(app_id, str(held)):
            await self._let_go(str(held), app_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            while True:
                try:
                    await pipe.watch(key)
                    found = await pipe.hget(key, "uid")
                    if found is None:
                        return False
                    uid = str(found)
                    uid_key = keys.apps_uid(uid) if uid and _here(app_id, uid) else None
                    holder = None
                    if uid_key is not None:
                        await pipe.watch(uid_key)
                        holder = await pipe.hget(uid_key, uid)
                    pipe.multi()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
                    pipe.delete(key, keys.app_limit(app_id))
                    pipe.zrem(keys.apps(keys.bucket_of(app_id)), app_id)
                    if uid_key is not None and holder == app_id:
                        pipe.hdel(uid_key, uid)
                    await pipe.execute()
                    return True
                except WatchError:
                    continue
