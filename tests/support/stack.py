"""Real processes for integration tests: Valkey with AOF, Celery workers, the scheduler."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from webhook_service.config import Settings
from webhook_service.crypto import generate_master_key
from webhook_service.embedded import EmbeddedValkey, start_valkey
from webhook_service.history.database import sync_engine, upgrade

ADMIN_KEY = "test-admin-key-0123456789abcdefghijklmnop"
# What the stack's Valkey is called where parts are named (fault plans, memory samples).
VALKEY = "valkey"


@dataclass
class Stack:
    directory: Path
    valkey: EmbeddedValkey
    env: dict[str, str]
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    # How each name was last started (role, extra environment): what ``relaunch`` repeats.
    launches: dict[str, tuple[str, dict[str, str]]] = field(default_factory=dict)

    def start(
        self, role: str, name: str | None = None, env: Mapping[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """``env`` adds to (or overrides) the stack's environment for this process only."""
        name = name or role
        self.launches[name] = (role, dict(env or {}))
        log = (self.directory / f"{name}.log").open("ab")
        process = subprocess.Popen(
            [sys.executable, "-m", "webhook_service", role],
            env={**self.env, **(env or {})},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.processes[name] = process
        return process

    def relaunch(self, name: str) -> subprocess.Popen[bytes]:
        """Start ``name`` again as it was last started: same role, same environment."""
        role, env = self.launches[name]
        return self.start(role, name, env)

    def kill(self, name: str) -> None:
        """SIGKILL the whole process group: a prefork worker and its children die at once."""
        process = self.processes.pop(name)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()

    def terminate(self, name: str, timeout: float = 60.0) -> int:
        """SIGTERM to the main process only, as a supervisor stops it; wait for the exit."""
        process = self.processes.pop(name)
        process.send_signal(signal.SIGTERM)
        return process.wait(timeout)

    def restart_valkey(self, down_for: float = 0.0) -> None:
        """kill -9, stay down a while, then start again on the same dir and port: only the
        AOF survives."""
        self.valkey.kill()
        time.sleep(down_for)
        self.valkey = start_valkey(self.valkey.directory, self.valkey.port)

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for name in list(self.processes):
            process = self.processes.pop(name)
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.valkey.stop()


def service_env(redis_url: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    # Nor the machine's OTEL_*: traces are off unless a test turns them on (test_tracing).
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WEBHOOK_", "OTEL_"))}
    env.update(
        {
            "WEBHOOK_REDIS_URL": redis_url,
            "WEBHOOK_ADMIN_KEY": ADMIN_KEY,
            "WEBHOOK_MASTER_KEY": generate_master_key(),
            "WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8",
            "WEBHOOK_RETRY_SCHEDULE": "0,0.3,0.3,0.3",
            "WEBHOOK_THROTTLE_FLOOR": "0",
            "WEBHOOK_WAKEUP_GRACE": "2",
            "WEBHOOK_SCHEDULER_INTERVAL": "0.2",
            "WEBHOOK_REQUEST_TIMEOUT": "3",
            "WEBHOOK_CONNECT_TIMEOUT": "1",
            "WEBHOOK_WORKER_CONCURRENCY": "2",
            "WEBHOOK_LOG_LEVEL": "INFO",
        }
    )
    env.update(extra or {})
    return env


def settings_of(env: Mapping[str, str]) -> Settings:
    """The settings a process started with ``env`` builds (from its WEBHOOK_* variables)."""
    old = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        return Settings()
    finally:
        os.environ.clear()
        os.environ.update(old)


def migrate_log(env: Mapping[str, str]) -> None:
    """Bring the log the environment names up to this release's schema."""
    engine = sync_engine(settings_of(env))
    try:
        upgrade(engine)
    finally:
        engine.dispose()


def start_stack(
    directory: Path,
    extra: Mapping[str, str] | None = None,
    workers: int = 1,
    scheduler: bool = True,
) -> Stack:
    """Valkey, then the processes; ``workers=0, scheduler=False`` is Valkey alone (tick mode)."""
    valkey = start_valkey(directory / "valkey")
    # Its own delivery log: the SQLite file in the stack's dir, migrated before any process
    # opens it (as `webhook-service up` does), unless `extra` names another log.
    env = service_env(valkey.url, {"WEBHOOK_DATA_DIR": str(directory), **(extra or {})})
    stack = Stack(directory, valkey, env)
    migrate_log(stack.env)
    for n in range(workers):
        stack.start("worker", f"worker{n}")
    if scheduler:
        stack.start("scheduler")
    return stack
