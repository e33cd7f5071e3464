"""``webhook-service migrate``: bring a store written by an older release up to
``schema.CURRENT``, and the log's database to this release's revision, once, while no API,
worker or scheduler runs (none starts on an older store, nor the API and scheduler on a log
behind).

The log's database first: its Alembic migrations (``history/database.py`` ``upgrade``), on
SQLite or on the PostgreSQL WEBHOOK_LOG_URL names. Then the store, one step per schema, each
stamped when done, so that a run cut short starts again at the step it was in, and each
step may be run again.

Schema 4 -> 5 moves every key into its bucket (``store/bucket_migration.py``: all of an
older store into bucket 0, with the bucket epoch that makes its ids read as of that
bucket). It runs first, whatever the version: the older steps below read and write the
keys by this release's names, which are bucket 0's for everything such a store holds. The
store is stamped 5 last.

Schema 1 -> 2: endpoint header values stored in clear are sealed under the current master
key by the endpoint store's own ``seal_headers``. Each endpoint is rewritten on its own under
optimistic locking (WATCH, re-read, MULTI / HSET of ``headers`` alone / EXEC), so a run cut
short leaves every endpoint either as it was or done, and the next run does the rest. A value
that opens already is left as it is. One shaped like a sealed value that does not open
(sealed under a master key not given) is reported and left alone; it is not sealed twice.
The step is stamped once nothing is left in clear.

Schema 2 -> 3: the history moves into the log. An endpoint made before sequence numbers
gets one (the same rewrite), so that every new delivery id ends with one; then
``history/backfill.py`` moves every event, delivery and attempt, each batch committed before
Redis lets go of it, and deletes the history indexes and the retention cursor. The store is
stamped 3 last.

Schema 3 -> 4: the single-tenant store moves into the default application
(``store/tenancy_migration.py``): its endpoints, their subscriptions, the events Redis still
holds, the idempotency records and the log records not yet shipped. Stamped 4. With
``--application NAME`` (and ``--uid UID``) it moves into a new application of that name
instead, made in the step (in bucket 0, where the store is; its uid's mapping where lookups
look), and the log's rows of the default application follow it (``history/reassign.py``);
operations endpoints stay in the default application, the only one that may hold them. The
flat routes then act on the default application, which starts empty. A store at schema 4 or
later is in applications already: the option is refused there, before any step.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

import redis
import sqlalchemy as sa

from webhook_service.crypto import MasterKeyError, SecretBox, looks_sealed
from webhook_service.history import backfill
from webhook_service.history.reassign import reassign
from webhook_service.ids import seq_tail
from webhook_service.store import bucket_migration, keys, schema, tenancy_migration
from webhook_service.store.applications import DEFAULT_APP_ID
from webhook_service.store.connect import primaries
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
    numbered: int = 0  # endpoints made before sequence numbers, given one now
    moved: backfill.Moved | None = None  # the history moved into the log, if this run did
    indexes: int = 0  # history index keys deleted
    # what moved into the default application (or the one named), if this run made that step
    tenancy: tenancy_migration.Moved | None = None
    log_rows: int = 0  # the log's events and deliveries given to the application named
    # what moved into buckets, if this run made that step
    buckets: bucket_migration.Moved | None = None

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
    """Have Redis rewrite its AOF, which still holds what it was once given: clear header
    values, the history moved out (a rewrite writes only what is held now). Says what became
    of them."""
    try:
        # Each primary's own AOF, on a cluster: BGREWRITEAOF names no key.
        servers = [s for s in primaries(client) if int(s.info("persistence").get("aof_enabled", 0))]
        if not servers:
            return ""
        for server in servers:
            server.bgrewriteaof()
    except redis.ResponseError:
        return (
            "BGREWRITEAOF was refused: the AOF holds what was sealed or moved out until it "
            "is rewritten"
        )
    return "the AOF is being rewritten without what was sealed or moved out"


def _number(client: redis.Redis, endpoint_id: str) -> Rewrite:
    """Give an endpoint made before sequence numbers the next one, as endpoint_save.lua
    gives a new endpoint, with its tail in endpoints:seqs first: a number taken by a run cut
    short before the endpoint got it is left unused, which costs nothing."""
    if client.hexists(keys.endpoint(endpoint_id), "seq"):
        return Rewrite.UNCHANGED
    # Of the endpoint's bucket: bucket 0, where every endpoint of a store this old is.
    bucket = keys.bucket_of(endpoint_id)
    seq = client.incr(keys.endpoint_seq(bucket))
    client.hset(keys.endpoint_seqs(bucket), seq_tail(seq), endpoint_id)
    return rewrite_endpoint(
        client, endpoint_id, ("seq",), lambda values: None if values[0] else {"seq": str(seq)}
    )


def _seal_all(client: redis.Redis, box: SecretBox, report: MigrateReport, batch: int) -> None:
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


def migrate(
    client: redis.Redis,
    box: SecretBox,
    engine: sa.Engine,
    batch: int = 1000,
    destination: tenancy_migration.Destination = tenancy_migration.DEFAULT_DESTINATION,
) -> MigrateReport:
    """Bring the store to ``schema.CURRENT`` a step at a time (the log's database must be at
    this release's revision already: ``history.database.upgrade``). Schema 1 -> 2 stops short
    while a header value is left that does not open with ``box``. ``destination``: where
    schema 3 -> 4 moves a single-tenant store; one named is refused
    (``tenancy_migration.DestinationRefused``) on a store past that step."""
    before = schema.stored(client)
    if before is not None and before > schema.CURRENT:
        raise schema.SchemaMismatch(schema.refusal(before))
    version = schema.UNMARKED if before is None else before
    if destination.name is not None and version >= 4:
        raise tenancy_migration.DestinationRefused(
            f"the store is at schema {version}: its data is in applications already "
            "(--application names where a single-tenant store, schema 3 or older, moves); "
            "run `webhook-service migrate` without it"
        )
    report = MigrateReport(before)
    if version < 5:
        report.buckets = bucket_migration.move(client, batch)
    if version < 2:
        _seal_all(client, box, report, batch)
        if report.unopenable:
            if report.sealed:
                report.aof_note = _rewrite_aof(client)
            return report
        schema.stamp(client, 2)
    if version < 3:
        for endpoint_id in endpoint_ids(client, batch):
            if _number(client, endpoint_id) is Rewrite.REWRITTEN:
                report.numbered += 1
        report.moved = backfill.move(client, engine, batch)
        report.indexes = backfill.drop_indexes(client)
        schema.stamp(client, 3)
        # Whenever a step ends, even one that finishes a run cut short and has nothing left
        # to do: the AOF may hold what the first run sealed or moved still.
        report.aof_note = _rewrite_aof(client)
    if version < 4:
        report.tenancy = tenancy_migration.move(client, batch, destination)
        if destination.name is not None:
            report.log_rows = reassign(engine, DEFAULT_APP_ID, report.tenancy.application, batch)
        schema.stamp(client, 4)
    if version < 5:
        schema.stamp(client, 5)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    """``webhook-service migrate``; ``argv`` is what follows it."""
    parser = argparse.ArgumentParser(
        prog="webhook-service migrate",
        description="Bring the log's database and the store up to the schema this release "
        "reads: the log's migrations; endpoint header values stored in clear by earlier "
        "releases sealed under WEBHOOK_MASTER_KEY; the history Redis held moved into the log; "
        "a single-tenant store moved into the default application (or the one --application "
        "names); every key moved into "
        "its bucket (hash tags ready for a cluster). "
        "Stop every API, worker and scheduler first; safe to interrupt and run again.",
    )
    parser.add_argument(
        "--application",
        metavar="NAME",
        help="move a single-tenant store (schema 3 or older) into a new application of this "
        "name rather than the default one; the flat routes then act on the default "
        "application, which starts empty",
    )
    parser.add_argument(
        "--uid", metavar="UID", help="the uid of the application --application makes"
    )
    args = parser.parse_args(argv)
    destination = _destination(parser, args.application, args.uid)

    from webhook_service.config import Settings
    from webhook_service.history.database import revisions, sync_engine, upgrade
    from webhook_service.store.connect import RedisTimeouts, sync_client
    from webhook_service.wiring import ConfigurationError, secret_box

    settings = Settings()
    try:
        box = secret_box(settings)
    except (ConfigurationError, MasterKeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    engine = sync_engine(settings)
    client = sync_client(settings.effective_redis_url, RedisTimeouts.of(settings))
    try:
        was = revisions(engine)
        upgrade(engine)
        if (now := revisions(engine)) != was:
            print(f"the log's database ({engine.dialect.name}) is at revision {', '.join(now)}")
        report = migrate(client, box, engine, destination=destination)
    except (schema.SchemaMismatch, RewriteConflict, tenancy_migration.DestinationRefused) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except sa.exc.SQLAlchemyError as exc:
        print(f"error: the log's database: {exc}", file=sys.stderr)
        return 1
    finally:
        client.close()
        engine.dispose()
    note = f"{report.aof_note}; backups taken before hold it still"
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
    for line in _summary(report):
        print(line)
    if report.aof_note:
        print(note)
    return 0


def _destination(
    parser: argparse.ArgumentParser, name: str | None, uid: str | None
) -> tenancy_migration.Destination:
    """The options' application, checked as the API checks one it is asked to make (exits
    with the parser's usage error otherwise)."""
    from pydantic import ValidationError

    from webhook_service.api.models import ApplicationIn

    if name is None:
        if uid is not None:
            parser.error("--uid names the application --application makes: give both")
        return tenancy_migration.DEFAULT_DESTINATION
    try:
        ApplicationIn(name=name, uid=uid)
        return tenancy_migration.Destination(name, uid)
    except ValidationError as exc:
        options = {"name": "--application", "uid": "--uid"}
        parser.error("; ".join(f"{options[str(e['loc'][0])]}: {e['msg']}" for e in exc.errors()))
    except ValueError as exc:
        parser.error(str(exc))


def _summary(report: MigrateReport) -> list[str]:
    lines = []
    if report.sealed:
        lines.append(f"sealed headers of {report.sealed} endpoints")
    if report.numbered:
        lines.append(f"gave {report.numbered} endpoints made before them a sequence number")
    if (moved := report.moved) is not None:
        lines.append(
            f"moved to the log: {moved.events} events, {moved.deliveries} deliveries, "
            f"{moved.attempts} attempts; {moved.pending} pending deliveries (of "
            f"{moved.events_kept} events) stay in Redis, their attempts in the log only"
        )
        lines.append(f"deleted {report.indexes} history index keys")
    if (tenancy := report.tenancy) is not None:
        into = (
            "the default application"
            if tenancy.application == DEFAULT_APP_ID
            else "the application"
        )
        lines.append(
            f"moved into {into} ({tenancy.application}): {tenancy.endpoints} "
            f"endpoints, {tenancy.events} events, {tenancy.idempotency} idempotency records, "
            f"{tenancy.outbox} log records not yet shipped"
        )
        if tenancy.application != DEFAULT_APP_ID:
            lines.append(
                f"gave it the log's {report.log_rows} events and deliveries; "
                f"{tenancy.operations} operations endpoints stay in the default application; "
                f"the flat routes act on the default application, which holds nothing else: "
                f"the rest is under /v1/applications/{tenancy.application}/…"
            )
    if (buckets := report.buckets) is not None:
        lines.append(
            f"moved into buckets: {buckets.keys} keys renamed (what the store held into "
            f"bucket 0), {buckets.uids} uid mappings into their own bucket's"
        )
    lines.append(f"store is at schema {schema.CURRENT}")
    return lines
