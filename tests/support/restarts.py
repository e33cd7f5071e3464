"""A part of the stack stopped and started again, as a crash or a deploy does it: kill -9
(a crash) or SIGTERM (a supervisor's stop), then the same part back as it was, waited for
until it shows it works again."""

from __future__ import annotations

import time
from typing import cast

import redis

from tests.support.api_process import wait_healthy
from tests.support.stack import VALKEY, Stack
from webhook_service.store import keys
from webhook_service.store.bucket_leases import oldest_pass
from webhook_service.timeutil import now_ms

_READY_TIMEOUT = 60.0


def kill_and_restart(stack: Stack, name: str, valkey_down_for: float = 1.0) -> None:
    """SIGKILL ``name`` (its whole process group), start it again and wait until it is ready.
    Valkey stays down ``valkey_down_for`` seconds and comes back on its AOF alone."""
    if name == VALKEY:
        stack.restart_valkey(valkey_down_for)
        return
    stack.kill(name)
    stack.relaunch(name)
    wait_ready(stack, name)


def terminate_and_restart(stack: Stack, name: str, timeout: float = 60.0) -> int:
    """SIGTERM ``name`` as a supervisor stops it, wait for its exit, start it again and wait
    until it is ready; returns the exit code of the stopped process."""
    code = stack.terminate(name, timeout)
    stack.relaunch(name)
    wait_ready(stack, name)
    return code


def wait_ready(stack: Stack, name: str) -> None:
    """Until the process shows it works: an API answers /healthz, a worker's consumer has
    written its heartbeat (the hostname carries the pid), a scheduler has made a pass."""
    role = stack.launches[name][0]
    if role == "api":
        wait_healthy(stack, name)
        return
    process = stack.processes[name]
    started_ms = now_ms()
    client = redis.Redis.from_url(stack.valkey.url, decode_responses=True)
    deadline = time.monotonic() + _READY_TIMEOUT
    try:
        while not _shows_life(client, role, process.pid, started_ms):
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{name} is not ready; see {stack.directory}/{name}.log")
            time.sleep(0.2)
    finally:
        client.close()


def _shows_life(client: redis.Redis, role: str, pid: int, since_ms: int) -> bool:
    try:
        if role == "worker":
            beats: list[str] = client.zrange(keys.HEARTBEATS, 0, -1)  # type: ignore[assignment]
            return any(beat.startswith(f"whs-{pid}@") for beat in beats)
        # Every bucket passed over since: by it, or by the schedulers it shares them with.
        passed = oldest_pass(cast(dict[str, str], client.hgetall(keys.SCHEDULER_PASSES)))
        return passed is not None and passed >= since_ms
    except redis.RedisError:
        return False  # Valkey itself is restarting
