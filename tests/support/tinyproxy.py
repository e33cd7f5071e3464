"""A real HTTP proxy for tests: Debian's tinyproxy (`make tinyproxy`), run in the foreground
on a loopback port with a config file and log of its own in a temp dir, never the system
service. ``requests()`` reads back, from its log, every request it was asked to make."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.processes import terminate

TINYPROXY = "/usr/bin/tinyproxy"
# What the proxy puts in the Via header it adds to each forwarded request.
VIA_NAME = "webhook-test-proxy"


def available() -> bool:
    return shutil.which(TINYPROXY) is not None


@dataclass
class Tinyproxy:
    directory: Path
    port: int
    # (user, password) the proxy demands (its BasicAuth); None: it takes anyone on loopback.
    credentials: tuple[str, str] | None = None
    process: subprocess.Popen[bytes] | None = None

    @property
    def log(self) -> Path:
        return self.directory / "tinyproxy.log"

    def url(self, credentials: tuple[str, str] | None = None) -> str:
        userinfo = f"{credentials[0]}:{credentials[1]}@" if credentials else ""
        return f"http://{userinfo}127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start it (again, on the same port and log) and wait until it takes connections."""
        self.directory.mkdir(parents=True, exist_ok=True)
        lines = [
            f"Port {self.port}",
            "Listen 127.0.0.1",
            "Allow 127.0.0.1",
            "Timeout 30",
            "MaxClients 50",
            f'LogFile "{self.log}"',
            # Info names each request ("Request (file descriptor 5): POST http://…").
            "LogLevel Info",
            f'ViaProxyName "{VIA_NAME}"',
        ]
        if self.credentials is not None:
            lines.append(f"BasicAuth {self.credentials[0]} {self.credentials[1]}")
        config = self.directory / "tinyproxy.conf"
        config.write_text("\n".join(lines) + "\n")
        output = (self.directory / "tinyproxy.out").open("ab")
        # -d: in the foreground, so it is our child and stops with us.
        self.process = subprocess.Popen(
            [TINYPROXY, "-d", "-c", str(config)],
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 10
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"tinyproxy exited {self.process.returncode}; see {output.name}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5),
            ):
                return
            if time.monotonic() > deadline:
                raise RuntimeError("tinyproxy did not listen within 10 s")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process is None:
            return
        terminate(self.process)
        self.process = None

    def requests(self) -> list[str]:
        """Each request line it was asked for, in order: "POST http://h:p/path HTTP/1.1",
        "CONNECT h:443 HTTP/1.1"."""
        if not self.log.exists():
            return []
        marker = "Request (file descriptor "
        found = []
        for line in self.log.read_text(errors="replace").splitlines():
            if marker in line:
                found.append(line.split("): ", 1)[1])
        return found
