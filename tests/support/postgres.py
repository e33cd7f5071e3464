"""A throwaway PostgreSQL for the tests: Debian's binaries on a temp dir and a free port.

Never the server that may already run on this machine (5432): tests own theirs, start it
once a session and give each stack a database of its own (``create_database``). PostgreSQL
refuses to run as root and CI runs as root, so there every binary runs as the ``postgres``
user (``runuser``) on a directory that user owns; pytest's own temp dirs are private to
root, so the data dir is made beside them in the system temp dir instead.

The chaos tests stop it (``stop``), kill it (``kill``: SIGKILL to the postmaster and its
backends, a crash) and start it again on the same dir and port (``start``).

``start_replica`` makes a hot standby of a server (pg_basebackup -R, streaming replication
from 127.0.0.1, which initdb's ``-A trust`` lets any local role do), for the history read
from a replica (WEBHOOK_LOG_READ_URL); ``wait_replayed`` waits for it to catch up.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from webhook_service.embedded import free_port

BINARIES = Path("/usr/lib/postgresql")
SUPERUSER = "postgres"
# initdb and pg_ctl wait this long at most; a cold start here takes about a second.
_CTL_TIMEOUT = 60


def binaries() -> Path | None:
    """Debian's newest ``/usr/lib/postgresql/<version>/bin``, if the package is installed."""
    found = sorted(
        (path for path in BINARIES.glob("*/bin") if (path / "initdb").exists()),
        key=lambda path: int(path.parent.name) if path.parent.name.isdigit() else 0,
    )
    return found[-1] if found else None


def _as_owner(command: list[str]) -> list[str]:
    if os.geteuid() == 0:
        return ["runuser", "-u", SUPERUSER, "--", *command]
    return command


@dataclass
class Postgres:
    bin_dir: Path
    directory: Path
    port: int

    def url(self, database: str = "postgres", user: str = SUPERUSER) -> str:
        return f"postgresql://{user}@127.0.0.1:{self.port}/{database}"

    def _ctl(self, *args: str) -> None:
        subprocess.run(
            _as_owner([str(self.bin_dir / "pg_ctl"), "-D", str(self.directory), *args]),
            check=True,
            capture_output=True,
            timeout=_CTL_TIMEOUT,
        )

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 "
            # A test server: a crash of the machine loses it whole anyway.
            "-c fsync=off -c full_page_writes=off -c max_connections=200"
        )
        self._ctl("-o", options, "-l", str(self.directory / "server.log"), "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        """``fast``: backends are told to quit and a checkpoint is written; ``immediate``:
        they quit at once and the next start recovers from the WAL, as after a crash."""
        self._ctl("-m", mode, "-w", "stop")

    def kill(self) -> None:
        """kill -9 of the postmaster and every backend (a backend left alive would hold the
        shared memory and keep the next start from running)."""
        pid = int((self.directory / "postmaster.pid").read_text().split()[0])
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        for each in (pid, *map(int, children)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(each, signal.SIGKILL)
        deadline = time.monotonic() + _CTL_TIMEOUT
        while any(Path(f"/proc/{each}").exists() for each in children):
            if time.monotonic() > deadline:
                raise AssertionError("PostgreSQL backends outlived SIGKILL")
            time.sleep(0.05)

    def restart(self, down_for: float = 0.0, *, crash: bool = False) -> None:
        """Down (killed if ``crash``, else an immediate stop), ``down_for`` seconds, up again
        on the same dir and port."""
        if crash:
            self.kill()
        else:
            self.stop("immediate")
        time.sleep(down_for)
        self.start()

    def execute(self, sql: str, database: str = "postgres") -> None:
        """One statement as the superuser, outside a transaction (CREATE DATABASE needs it)."""
        with psycopg.connect(self.url(database), autocommit=True, connect_timeout=10) as conn:
            conn.execute(sql.encode())

    def create_database(self, owner: str = SUPERUSER) -> str:
        """A new, empty database of ``owner`` (a role ``create_role`` made): its URL as that
        role, for WEBHOOK_LOG_URL."""
        name = "log_" + uuid.uuid4().hex[:12]
        self.execute(f'CREATE DATABASE "{name}" OWNER "{owner}"')
        return self.url(name, owner)

    def create_role(self) -> str:
        """A new login role, no superuser: one whose rights a test can take away."""
        name = "whs_" + uuid.uuid4().hex[:12]
        self.execute(f'CREATE ROLE "{name}" LOGIN')
        return name

    def destroy(self) -> None:
        # It may be down already: a chaos test left it so.
        with contextlib.suppress(subprocess.CalledProcessError):
            self.stop("immediate")
        shutil.rmtree(self.directory, ignore_errors=True)


def _owned_dir() -> Path:
    directory = Path(tempfile.mkdtemp(prefix="whs-pg-"))
    if os.geteuid() == 0:
        shutil.chown(directory, SUPERUSER, SUPERUSER)
    return directory


def start_postgres() -> Postgres:
    bin_dir = binaries()
    if bin_dir is None:
        raise FileNotFoundError(f"no PostgreSQL under {BINARIES}: run `make postgresql`")
    directory = _owned_dir()
    subprocess.run(
        _as_owner([str(bin_dir / "initdb"), "-D", str(directory), "-A", "trust",
                   "-U", SUPERUSER, "--no-sync", "-E", "UTF8", "--locale", "C"]),
        check=True, capture_output=True, timeout=_CTL_TIMEOUT,
    )  # fmt: skip
    server = Postgres(bin_dir, directory, free_port())
    server.start()
    return server


def start_replica(primary: Postgres) -> Postgres:
    """A hot standby of ``primary`` on a port of its own, streaming from it: a base backup
    with its WAL (``-X stream``) and ``-R``'s standby.signal and primary_conninfo. No
    replication slot: a slot outliving a test would keep the primary's WAL for good."""
    directory = _owned_dir()
    subprocess.run(
        _as_owner([str(primary.bin_dir / "pg_basebackup"), "-D", str(directory), "-R",
                   "-X", "stream", "-c", "fast", "-h", "127.0.0.1", "-p", str(primary.port),
                   "-U", SUPERUSER, "--no-sync"]),
        check=True, capture_output=True, timeout=_CTL_TIMEOUT,
    )  # fmt: skip
    replica = Postgres(primary.bin_dir, directory, free_port())
    replica.start()
    return replica


def wait_replayed(primary: Postgres, replica: Postgres, timeout: float = 30.0) -> None:
    """Until ``replica`` has replayed all the WAL ``primary`` had written at the call."""
    with psycopg.connect(primary.url(), autocommit=True, connect_timeout=10) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    assert row is not None
    deadline = time.monotonic() + timeout
    with psycopg.connect(replica.url(), autocommit=True, connect_timeout=10) as conn:
        while True:
            done = conn.execute(
                "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (row[0],)
            ).fetchone()
            if done is not None and done[0]:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the standby did not replay up to {row[0]} in {timeout}s")
            time.sleep(0.02)


# One server a session, however many conftests register the fixture: the integration and
# the chaos directories each do, and a session that runs both shares it.
_shared: Postgres | None = None
_users = 0
_guard = threading.Lock()


def require_binaries() -> None:
    """Skip the test without Debian's binaries (fail it on CI, where `make` installs them)."""
    if binaries() is None:
        message = "Debian's postgresql is not installed: run `make postgresql`"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    global _shared, _users
    with _guard:
        if _shared is None:
            require_binaries()
            _shared = start_postgres()
        _users += 1
        server = _shared
    try:
        yield server
    finally:
        with _guard:
            _users -= 1
            if _users == 0 and _shared is not None:
                _shared.destroy()
                _shared = None


def log_env(request: pytest.FixtureRequest, backend: str) -> dict[str, str]:
    """The environment that gives a stack a fresh log on ``backend``: nothing for SQLite
    (its file in the stack's WEBHOOK_DATA_DIR), a new database's URL for PostgreSQL, whose
    server starts only when a test asks for it."""
    if backend == "sqlite":
        return {}
    server: Postgres = request.getfixturevalue("postgres")
    return {"WEBHOOK_LOG_URL": server.create_database()}
