"""``webhook-service migrate``: bring a store written by an older release up to
``schema.CURRENT``, once, while no API, worker or scheduler runs (none starts on an older
store).

Schema 1 -> 2: endpoint header values stored in clear are sealed under the current master
key by the endpoint store's own ``seal_headers``. Each endpoint is rewritten on its own under
optimistic locking (WATCH, re-read, MULTI / HSET of ``headers`` alone / EXEC), so a run cut
short leaves every endpoint either as it was or done, and the next run does the rest. A value
that opens already is left as it is. One shaped like a sealed value that does not open
(sealed under a master key not given) is reported and left alone; it is not sealed twice.
The marker is stamped last, once nothing is left in clear.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

import redis

from webhook_service.crypto import MasterKeyError, SecretBox, looks_sealed
from webhook_service.store import schema
from webhook_service.store.endpoint_rewrite import (
    Rewrite,
    RewriteConflict,
    endpoint_ids,
    rewrite_endpoint,
)
from webhook_service.store.endpoints import (
    decode_headers,
    encode_headers,
    header_associated,
    seal_headers,
)


@dataclass
class MigrateReport:
    before: int | None  # the marker found; None: there was none
    sealed: int = 0  # endpoints whose clear header values were sealed now
    current: int = 0  # endpoints with nothing in clear
    missing: int = 0  # endpoints deleted between the listing and the rewrite
    # "endpoint ep_… header X-…": sealed under a key not given, so neither opened nor sealed
    unopenable: list[str] = field(default_factory=list)
    aof_note: str = ""  # what became of the clear values in the AOF, when some were sealed

    @property
    def changed(self) -> bool:
        return self.sealed > 0 or self.before != schema.CURRENT


def _opens(box: SecretBox, token: str, associated: str) -> bool:
    try:
        box.open(token, associated)
    except MasterKeyError:
        return False
    return True


def _sealed(box: SecretBox, endpoint_id: str, text: str) -> tuple[str | None, list[str]]:
    """The endpoint's ``headers`` with every clear value sealed (None when none is clear),
    and the names whose value looks sealed but does not open with ``box``."""
    headers = decode_headers(text)
    clear: dict[str, str] = {}
    unopenable: list[str] = []
    for name, value in headers.items():
        if _opens(box, value, header_associated(endpoint_id, name)):
            continue
        if looks_sealed(value):
            unopenable.append(name)
        else:
            clear[name] = value
    if not clear:
        return None, unopenable
    sealed = seal_headers(box, endpoint_id, clear)
    return encode_headers({name: sealed.get(name, v) for name, v in headers.items()}), unopenable


def _migrate_one(
    client: redis.Redis, box: SecretBox, endpoint_id: str
) -> tuple[Rewrite, list[str]]:
    unopenable: list[str] = []

    def change(values: list[str]) -> dict[str, str] | None:
        nonlocal unopenable
        headers, unopenable = _sealed(box, endpoint_id, values[0])
        return None if headers is None else {"headers": headers}

    return rewrite_endpoint(client, endpoint_id, ("headers",), change), unopenable


def _rewrite_aof(client: redis.Redis) -> str:
    """Have Redis rewrite its AOF, which still holds the clear values it was once given (a
    rewrite writes only what is held now); says what became of them."""
    try:
        if not int(client.info("persistence").get("aof_enabled", 0)):
            return ""
        client.bgrewriteaof()
    except redis.ResponseError:
        return "BGREWRITEAOF was refused: the AOF holds the clear values until it is rewritten"
    return "the AOF is being rewritten without the clear values"


def migrate(client: redis.Redis, box: SecretBox, batch: int = 100) -> MigrateReport:
    """Seal every clear header value of every endpoint under ``box``'s current key, then
    stamp the store ``schema.CURRENT`` (not while a value is left that does not open)."""
    before = schema.stored(client)
    if before is not None and before > schema.CURRENT:
        raise schema.SchemaMismatch(schema.refusal(before))
    report = MigrateReport(before)
    for endpoint_id in endpoint_ids(client, batch):
        outcome, unopenable = _migrate_one(client, box, endpoint_id)
        report.unopenable += [f"endpoint {endpoint_id} header {name}" for name in unopenable]
        match outcome:
            case Rewrite.REWRITTEN:
                report.sealed += 1
            case Rewrite.UNCHANGED:
                report.current += 1
            case Rewrite.MISSING:
                report.missing += 1
    stamping = not report.unopenable and before != schema.CURRENT
    # Also when a run finishing an interrupted one seals nothing: the AOF still holds what
    # was in clear before the first.
    if report.sealed or (stamping and report.current):
        report.aof_note = _rewrite_aof(client)
    if stamping:
        schema.stamp(client)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    """``webhook-service migrate``; ``argv`` is what follows it."""
    parser = argparse.ArgumentParser(
        prog="webhook-service migrate",
        description="Bring the store up to the schema this release reads: seal endpoint "
        "header values stored in clear by earlier releases under WEBHOOK_MASTER_KEY. Stop "
        "every API, worker and scheduler first; safe to interrupt and run again.",
    )
    parser.parse_args(argv)

    from webhook_service.config import Settings
    from webhook_service.store.connect import RedisTimeouts, sync_client
    from webhook_service.wiring import ConfigurationError, secret_box

    settings = Settings()
    try:
        box = secret_box(settings)
    except (ConfigurationError, MasterKeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    client = sync_client(settings.effective_redis_url, RedisTimeouts.of(settings))
    try:
        report = migrate(client, box)
    except (schema.SchemaMismatch, RewriteConflict) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        client.close()
    note = f"{report.aof_note}; backups taken before hold them in clear still"
    if report.unopenable:
        for item in report.unopenable:
            print(f"error: {item} looks sealed but does not open", file=sys.stderr)
        print(
            f"sealed headers of {report.sealed} endpoints; the store stays at schema "
            f"{report.before or schema.UNMARKED}. Give the master key that sealed those "
            "values in WEBHOOK_PREVIOUS_MASTER_KEYS and run again.",
            file=sys.stderr,
        )
        if report.aof_note:
            print(note, file=sys.stderr)
        return 1
    if not report.changed:
        print(f"nothing to migrate: the store is at schema {schema.CURRENT} already")
        return 0
    print(f"sealed headers of {report.sealed} endpoints; store is at schema {schema.CURRENT}")
    if report.aof_note:
        print(note)
    return 0
