"""A Prometheus of the test's own: Debian's /usr/bin/prometheus (`make prometheus`) on a
free loopback port, its TSDB and config in a temp dir, scraping what the test names."""

from __future__ import annotations

import http.client
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.support.processes import terminate
from webhook_service.embedded import free_port

PROMETHEUS = Path("/usr/bin/prometheus")
PROMTOOL = Path("/usr/bin/promtool")
_READY_S = 30.0


@dataclass
class Prometheus:
    process: subprocess.Popen[bytes]
    url: str
    log: Path

    def stop(self) -> None:
        terminate(self.process)


def _ready(port: int) -> bool:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
    try:
        connection.request("GET", "/-/ready")
        return connection.getresponse().status == 200
    except OSError:
        return False
    finally:
        connection.close()


def start_prometheus(directory: Path, config: dict[str, Any]) -> Prometheus:
    """Start it on ``config`` (prometheus.yml as a dict; relative rule files are read from
    ``directory``) and wait until it says it is ready."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    port = free_port()
    log = directory / "prometheus.log"
    process = subprocess.Popen(
        [
            str(PROMETHEUS),
            f"--config.file={directory / 'prometheus.yml'}",
            f"--storage.tsdb.path={directory / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        cwd=directory,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )
    running = Prometheus(process, f"http://127.0.0.1:{port}", log)
    deadline = time.monotonic() + _READY_S
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"prometheus exited {process.returncode}: {log.read_text()}")
        if _ready(port):
            return running
        if time.monotonic() > deadline:
            running.stop()
            raise RuntimeError(f"prometheus not ready in {_READY_S} s: {log.read_text()}")
        time.sleep(0.1)
