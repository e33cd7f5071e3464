"""The log's database: SQLite in the data dir unless ``WEBHOOK_LOG_URL`` names PostgreSQL.

The shipper writes with a sync engine (it runs in a thread of the scheduler, or of the
tick); the API reads with an async one. PostgreSQL goes through psycopg 3, one driver for
both; SQLite through the standard sqlite3 module and aiosqlite.

With ``WEBHOOK_LOG_READ_URL`` the history's reads go to a hot standby of that PostgreSQL
(``async_engine(settings, read=True)``); what writes, and what a write is made from (the
shipper, purges, the rows a revival puts back), stays on the primary.

SQLite runs in WAL mode, so readers never block the one writer (the shipper) and it never
blocks them; ``synchronous=FULL`` because the shipper trims the outbox once a batch is
committed, and a commit lost to a power cut would then be lost for good.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from pydantic import SecretStr
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from webhook_service.config import Settings
from webhook_service.history import partitions
from webhook_service.timeutil import now_ms

SQLITE_FILE = "log.sqlite3"
# How long a SQLite connection waits for the write lock (another process migrating).
_SQLITE_BUSY_MS = 5000


class LogUnconfigured(ValueError):
    """WEBHOOK_LOG_URL, or WEBHOOK_LOG_READ_URL, names a database we do not run on."""


_SPELLED = {"sqlite": "sqlite:///<file>", "postgresql": "postgresql://…"}


def _checked(value: SecretStr, name: str, backends: tuple[str, ...]) -> sa.URL:
    """The URL ``name`` holds, without a driver, if it names one of ``backends``."""
    url = make_url(value.get_secret_value())
    backend = url.get_backend_name()
    if backend not in backends:
        spelled = " or ".join(_SPELLED[each] for each in backends)
        raise LogUnconfigured(f"{name} must be {spelled}, not {backend}://")
    return url.set(drivername=backend)


def log_url(settings: Settings) -> sa.URL:
    """The URL of the log, without a driver: ``sqlite`` or ``postgresql``."""
    if settings.log_url is None:
        return make_url(f"sqlite:///{(settings.data_dir / SQLITE_FILE).resolve()}")
    return _checked(settings.log_url, "WEBHOOK_LOG_URL", ("sqlite", "postgresql"))


def read_url(settings: Settings) -> sa.URL:
    """Where the history is read: WEBHOOK_LOG_READ_URL, a standby of the PostgreSQL log,
    else the log itself."""
    primary = log_url(settings)
    if settings.log_read_url is None:
        return primary
    if primary.get_backend_name() != "postgresql":
        raise LogUnconfigured(
            "WEBHOOK_LOG_READ_URL names a standby of the log's PostgreSQL: it needs "
            "WEBHOOK_LOG_URL=postgresql://…"
        )
    return _checked(settings.log_read_url, "WEBHOOK_LOG_READ_URL", ("postgresql",))


# The standby's replay lag in seconds: how old the last commit it replayed is, or 0 while
# it has replayed all it received (an idle primary sends nothing, and that commit's age
# would grow for nothing). NULL on a server that is not a standby.
REPLAY_LAG = sa.select(
    sa.literal_column(
        "CASE WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0 "
        "ELSE extract(epoch FROM now() - pg_last_xact_replay_timestamp()) END",
        sa.Float,
    )
)


def _driver(url: sa.URL, *, sync: bool) -> sa.URL:
    if url.get_backend_name() == "postgresql":
        return url.set(drivername="postgresql+psycopg")
    return url.set(drivername="sqlite+pysqlite" if sync else "sqlite+aiosqlite")


def _connect_args(url: sa.URL, timeout: float) -> dict[str, Any]:
    if url.get_backend_name() == "postgresql":
        # Every wait bounded: the connection, and each statement on the server; and a
        # transaction left idle (its process frozen or cut off mid-batch) ends, so that its
        # row locks never hold up the shipper that took over.
        ms = int(timeout * 1000)
        return {
            "connect_timeout": max(1, int(timeout)),
            "options": f"-c statement_timeout={ms} -c idle_in_transaction_session_timeout={ms}",
        }
    return {"timeout": _SQLITE_BUSY_MS / 1000}


def _on_sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=FULL")
    cursor.execute(f"PRAGMA busy_timeout={_SQLITE_BUSY_MS}")
    cursor.close()


def _prepare(url: sa.URL) -> None:
    if url.get_backend_name() == "sqlite" and url.database:
        Path(url.database).parent.mkdir(parents=True, exist_ok=True)


def sync_engine(settings: Settings) -> sa.Engine:
    url = log_url(settings)
    _prepare(url)
    engine = sa.create_engine(
        _driver(url, sync=True),
        connect_args=_connect_args(url, settings.log_timeout),
        pool_pre_ping=True,
    )
    if url.get_backend_name() == "sqlite":
        sa.event.listen(engine, "connect", _on_sqlite_connect)
    return engine


def async_engine(settings: Settings, *, read: bool = False) -> AsyncEngine:
    """``read``: for the history's reads alone, on the standby if there is one."""
    url = read_url(settings) if read else log_url(settings)
    _prepare(url)
    engine = create_async_engine(
        _driver(url, sync=False),
        connect_args=_connect_args(url, settings.log_timeout),
        pool_pre_ping=True,
        pool_timeout=settings.log_timeout,
    )
    if url.get_backend_name() == "sqlite":
        sa.event.listen(engine.sync_engine, "connect", _on_sqlite_connect)
    return engine


def _migrations() -> Config:
    config = Config()
    config.set_main_option("script_location", str(files("webhook_service.history") / "migrations"))
    return config


def upgrade(engine: sa.Engine) -> None:
    """Bring the log's schema up to this release's (the migrations in ``migrations/``),
    with PostgreSQL's day partitions made for today and the days ahead."""
    config = _migrations()
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "head")
        partitions.ensure(conn, now_ms())


def revisions(engine: sa.Engine) -> frozenset[str]:
    """The revisions the log's database is at (none before its first migration)."""
    with engine.connect() as conn:
        return frozenset(MigrationContext.configure(conn).get_current_heads())


def check_current(engine: sa.Engine) -> str | None:
    """None when the log's database is at this release's revision, else the one line
    saying why no process may use it. Raises the driver's error when it cannot be reached."""
    scripts = ScriptDirectory.from_config(_migrations())
    at, head = revisions(engine), frozenset(scripts.get_heads())
    if at == head:
        return None
    if at - {script.revision for script in scripts.walk_revisions()}:
        return (
            f"the delivery log's database is at revision {', '.join(sorted(at))}, newer than "
            "this release reads; run the release that migrated it, or a later one"
        )
    where = f"at revision {', '.join(sorted(at))}" if at else "not migrated yet"
    return (
        f"the delivery log's database is {where}, this release needs {', '.join(sorted(head))}; "
        "run `webhook-service migrate` (with the same WEBHOOK_* settings) first"
    )
