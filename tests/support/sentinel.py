"""A Sentinel-watched Valkey for failover tests: a primary, a replica, three sentinels.

Every node runs the embedded Valkey binary with AOF, on free ports in a temp dir; the
sentinels are the same binary with ``--sentinel`` and a generated config (quorum 2, a
primary is down after two silent seconds). The nodes share one password, so whichever is
the primary, the URL's credentials and the replicas' ``masterauth`` fit it; the sentinels
have none (they hold no data).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast
from urllib.parse import quote

import redis

from webhook_service.embedded import EmbeddedValkey, free_port, start_valkey, valkey_binary
from webhook_service.private_files import PRIVATE_UMASK, private_dir, write_private

SERVICE = "mymaster"
QUORUM = 2
# Short, so the test is short; at 1 s, a starved sentinel on a busy 2-core machine once
# judged the fresh primary down and failed over a second time, to a replica mid-sync.
DOWN_AFTER_MS = 2000
FAILOVER_TIMEOUT_MS = 3000


def _until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except redis.RedisError:
            pass  # a node still starting or just killed: ask again
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s")
        time.sleep(0.1)


def _role_and_replicas(node: EmbeddedValkey) -> tuple[str, int]:
    """The node's role, and how many replicas follow it online (past their full sync)."""
    with redis.Redis.from_url(node.url, decode_responses=True, socket_timeout=1.0) as client:
        replication = client.info("replication")
    online = [
        value
        for name, value in replication.items()
        if name.startswith("slave") and isinstance(value, dict) and value["state"] == "online"
    ]
    return replication["role"], len(online)


@dataclass
class SentinelTopology:
    directory: Path
    nodes: dict[int, EmbeddedValkey]
    sentinels: list[subprocess.Popen[bytes]]
    sentinel_ports: list[int]
    password: str = field(repr=False)
    clients: list[redis.Redis] = field(init=False)

    def __post_init__(self) -> None:
        self.clients = [
            redis.Redis(port=port, decode_responses=True, socket_timeout=1.0)
            for port in self.sentinel_ports
        ]

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)
        return f"sentinel://:{quote(self.password, safe='')}@{hosts}/0?service_name={SERVICE}"

    def primary_port(self) -> int:
        """The primary's port as the sentinels see it now."""
        address = self.clients[0].sentinel_get_master_addr_by_name(SERVICE)
        _host, port = cast(tuple[str, int], address)
        return int(port)

    def _agreed(self, primary: int, *, replicas: int) -> bool:
        """Every sentinel names ``primary``, sees it up, and knows the two other sentinels;
        the primary runs as one, with ``replicas`` replicas online."""
        for client in self.clients:
            state = cast(dict[str, Any], client.sentinel_master(SERVICE))
            if int(state["port"]) != primary or state["num-other-sentinels"] < 2:
                return False
            if state["is_sdown"] or state["is_odown"]:
                return False
        return _role_and_replicas(self.nodes[primary]) == ("master", replicas)

    def wait_ready(self, timeout: float = 20.0) -> None:
        """Until a failover could be agreed on and would have a replica to promote."""
        _until(lambda: self._agreed(self.primary_port(), replicas=1), timeout, "sentinels ready")

    def kill_primary(self) -> int:
        """SIGKILL the primary; returns its port."""
        port = self.primary_port()
        self.nodes[port].kill()
        return port

    def wait_failover(self, old: int, timeout: float = 20.0) -> int:
        """Until every sentinel names another primary and it has taken the role."""

        def promoted() -> bool:
            port = self.primary_port()
            return port != old and self._agreed(port, replicas=0)

        _until(promoted, timeout, "failover")
        return self.primary_port()

    def rejoin(self, port: int) -> None:
        """Start a killed node again on its dir and port, as a replica of the primary now.
        (Left to the sentinels, a returning primary is converted only after 8 s.)"""
        primary = ("--replicaof", "127.0.0.1", str(self.primary_port()))
        self.nodes[port] = start_valkey(self.nodes[port].directory, port, extra=primary)

    def stop(self) -> None:
        for sentinel in self.sentinels:
            sentinel.terminate()
        for sentinel in self.sentinels:
            try:
                sentinel.wait(10)
            except subprocess.TimeoutExpired:
                sentinel.kill()
                sentinel.wait()
        for client in self.clients:
            client.close()
        for node in self.nodes.values():
            node.stop()


def _sentinel_conf(directory: Path, port: int, primary: EmbeddedValkey) -> Path:
    conf = private_dir(directory) / "sentinel.conf"
    # Sentinel rewrites this file as it learns the topology, so each gets its own. auth-pass:
    # the password it logs in to every node with, the primary and its replicas.
    write_private(
        conf,
        f"port {port}\n"
        "bind 127.0.0.1\n"
        f"dir {directory}\n"
        f"logfile {directory / 'sentinel.log'}\n"
        f"sentinel monitor {SERVICE} 127.0.0.1 {primary.port} {QUORUM}\n"
        f"sentinel auth-pass {SERVICE} {primary.password}\n"
        f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}\n"
        f"sentinel failover-timeout {SERVICE} {FAILOVER_TIMEOUT_MS}\n"
        f"sentinel parallel-syncs {SERVICE} 1\n",
    )
    return conf


def start_sentinel_topology(directory: Path) -> SentinelTopology:
    primary = start_valkey(directory / "node-a")
    replica = start_valkey(
        directory / "node-b",
        extra=("--replicaof", "127.0.0.1", str(primary.port)),
        password=primary.password,
    )
    ports = [free_port() for _ in range(3)]
    sentinels = [
        subprocess.Popen(
            [str(valkey_binary()), str(_sentinel_conf(directory / f"s{n}", port, primary)),
             "--sentinel"],
            stdin=subprocess.DEVNULL,
            umask=PRIVATE_UMASK,  # its rewrites of the config keep the password private
        )
        for n, port in enumerate(ports)
    ]  # fmt: skip
    topology = SentinelTopology(
        directory,
        {primary.port: primary, replica.port: replica},
        sentinels,
        ports,
        primary.password,
    )
    try:
        topology.wait_ready()
    except BaseException:
        topology.stop()
        raise
    return topology
