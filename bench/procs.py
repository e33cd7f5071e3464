"""Child processes of a bench run: start them in their own group, find their memory, stop them."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Child:
    name: str
    process: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM to the whole group (prefork children too), SIGKILL if it lingers."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.pid, signal.SIGKILL)
                self.process.wait()

    def cpu_seconds(self) -> float:
        """User + system CPU so far of this process and its live descendants."""
        return sum(_cpu(pid) for pid in process_tree(self.pid)) / _TICKS

    def rss_bytes(self) -> dict[str, int]:
        """Resident memory of this process and each of its descendants, by pid."""
        return {f"{self.name}:{pid}": status_bytes(pid) for pid in process_tree(self.pid)}


def spawn(
    name: str, args: Sequence[str], env: Mapping[str, str], log_dir: Path, cwd: Path | None = None
) -> Child:
    """``cwd``: where ``python -m`` finds its packages; by default this checkout's root."""
    log = (log_dir / f"{name}.log").open("ab")
    process = subprocess.Popen(
        [sys.executable, *args],
        env=dict(env),
        cwd=cwd or Path.cwd(),
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    log.close()
    return Child(name, process)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_port(child: Child, port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not child.alive():
            raise RuntimeError(f"{child.name} exited during start-up; see its log")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"{child.name} did not listen on {port} within {timeout}s")


def process_tree(pid: int) -> list[int]:
    """``pid`` and its live descendants."""
    found = [pid]
    for parent in found:
        path = Path(f"/proc/{parent}/task/{parent}/children")
        with contextlib.suppress(OSError):
            found += [int(p) for p in path.read_text().split()]
    return found


def _cpu(pid: int) -> int:
    with contextlib.suppress(OSError):
        # Fields after the command name, which may itself hold spaces or parentheses.
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime, stime in clock ticks
    return 0


def status_bytes(pid: int, field: str = "VmRSS") -> int:
    """A memory figure of /proc/PID/status in bytes: VmRSS now, VmHWM the peak so far; 0
    for a process that has gone."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
    return 0
