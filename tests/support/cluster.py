"""A real Valkey Cluster of 3 primaries on loopback, from the Valkey binary the tests use
(DESIGN.md, "Cluster-ready keys"): three nodes with cluster mode on, each in a directory of
its own on free ports, joined with CLUSTER MEET, the 16 384 slots split among them with
CLUSTER ADDSLOTSRANGE, ready once every node says cluster_state:ok; with ``replicas``, that
many more nodes per primary, each made its replica with CLUSTER REPLICATE and ready once in
sync. No outside tooling."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import redis

from webhook_service.embedded import EmbeddedValkey, free_port, start_valkey

SLOTS = 16_384
_READY_S = 30.0


@dataclass(frozen=True)
class Cluster:
    nodes: tuple[EmbeddedValkey, ...]  # the primaries as formed
    password: str
    replicas: tuple[EmbeddedValkey, ...] = ()  # each primary's, in the primaries' order

    @property
    def every(self) -> tuple[EmbeddedValkey, ...]:
        """Every node, whatever its role now (a failover swaps them)."""
        return self.nodes + self.replicas

    @property
    def seed(self) -> EmbeddedValkey:
        return self.nodes[0]

    def url(self, seeds: int = 2) -> str:
        """The service's ``redis+cluster://`` URL, naming the first ``seeds`` nodes (any few
        will do: the client asks them for the rest)."""
        named = ",".join(f"127.0.0.1:{node.port}" for node in self.nodes[:seeds])
        return f"redis+cluster://:{self.password}@{named}"


# redis-py leaves execute_command untyped.
def _client(node: EmbeddedValkey) -> redis.Redis:
    return redis.Redis(
        host="127.0.0.1", port=node.port, password=node.password, decode_responses=True
    )


Ranges = list[tuple[int, int]]


def even(primaries: int) -> list[Ranges]:
    """The slots split evenly, a range each, as cluster tooling does."""
    share = SLOTS // primaries
    return [
        [(n * share, SLOTS - 1 if n == primaries - 1 else (n + 1) * share - 1)]
        for n in range(primaries)
    ]


def apart(*alone: int) -> list[Ranges]:
    """One node for each slot named, alone, and the last node for every other slot: a script
    on one of those slots that touched a key of any other slot would be refused (Valkey
    refuses only a key no slot of its node holds)."""
    others: Ranges = []
    low = 0
    for slot in sorted(set(alone)):
        if slot > low:
            others.append((low, slot - 1))
        low = slot + 1
    if low < SLOTS:
        others.append((low, SLOTS - 1))
    return [[(slot, slot)] for slot in alone] + [others]


@contextlib.contextmanager
def running(
    directory: Path,
    slots: list[Ranges] | None = None,
    *,
    aof: bool = False,
    replicas: int = 0,
    node_timeout_ms: int = 5000,
) -> Iterator[Cluster]:
    """The cluster (``slots``: each primary's ranges; three even ones by default), formed;
    every node stopped after. ``aof``: each node with AOF on, as the service's /readyz
    expects of a store (off, the store tests save the disk writes). ``replicas`` per
    primary. ``node_timeout_ms``: how long a primary may be unreachable before its replica
    takes over (cluster-node-timeout)."""
    layout = slots or even(3)
    started: list[EmbeddedValkey] = []
    password = "cluster-" + str(time.time_ns())
    try:
        for n in range(len(layout) * (1 + replicas)):
            home = directory / f"node{n}"
            extra = (
                "--cluster-enabled", "yes",
                "--cluster-config-file", str(home / "nodes.conf"),
                # The bus port, chosen free rather than the port + 10 000 it defaults to.
                "--cluster-port", str(free_port()),
                "--cluster-node-timeout", str(node_timeout_ms),
                "--appendonly", "yes" if aof else "no",
            )  # fmt: skip
            started.append(start_valkey(home, extra=extra, password=password))
        primaries, followers = started[: len(layout)], started[len(layout) :]
        _form(primaries, followers, layout)
        yield Cluster(tuple(primaries), password, tuple(followers))
    finally:
        for node in started:
            node.kill()


def _form(
    primaries: list[EmbeddedValkey], followers: list[EmbeddedValkey], layout: list[Ranges]
) -> None:
    every = primaries + followers
    clients = [_client(node) for node in every]
    try:
        first = clients[0]
        bus = int(str(first.config_get("cluster-port")["cluster-port"]))
        for client in clients[1:]:
            client.execute_command("CLUSTER", "MEET", "127.0.0.1", every[0].port, bus)  # type: ignore[no-untyped-call]
        for client, ranges in zip(clients, layout, strict=False):
            bounds = [bound for pair in ranges for bound in pair]
            client.execute_command("CLUSTER", "ADDSLOTSRANGE", *bounds)  # type: ignore[no-untyped-call]
        _until(lambda: all(_ok(c, len(every)) for c in clients), "cluster_state:ok")
        ids = [node_id(node) for node in primaries]
        for n, client in enumerate(clients[len(primaries) :]):
            # Followers in turn, a primary each: follower n replicates primary n % primaries.
            client.execute_command("CLUSTER", "REPLICATE", ids[n % len(primaries)])  # type: ignore[no-untyped-call]
        _until(lambda: all(_in_sync(c) for c in clients[len(primaries) :]), "replicas in sync")
        _until(lambda: all(_ok(c, len(every)) for c in clients), "cluster_state:ok")
    finally:
        for client in clients:
            client.close()


def _until(ready: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + _READY_S
    while not ready():
        if time.monotonic() > deadline:
            raise RuntimeError(f"the cluster did not reach {what}")
        time.sleep(0.1)


def _fields(reply: object) -> dict[str, str]:
    return dict(line.split(":", 1) for line in str(reply).split() if ":" in line)


def _ok(client: redis.Redis, nodes: int) -> bool:
    fields = _fields(client.execute_command("CLUSTER", "INFO"))  # type: ignore[no-untyped-call]
    return fields.get("cluster_state") == "ok" and fields.get("cluster_known_nodes") == str(nodes)


def _in_sync(client: redis.Redis) -> bool:
    fields = client.info("replication")
    return fields.get("role") == "slave" and fields.get("master_link_status") == "up"


def node_id(node: EmbeddedValkey) -> str:
    client = _client(node)
    try:
        return str(client.execute_command("CLUSTER", "MYID"))  # type: ignore[no-untyped-call]
    finally:
        client.close()


_BATCH = 100  # keys per MIGRATE, as the cluster tooling's default pipeline
_MIGRATE_TIMEOUT_MS = 5000


def move_slot(
    cluster: Cluster,
    slot: int,
    source: EmbeddedValkey,
    target: EmbeddedValkey,
    *,
    between_batches: float = 0.0,
) -> int:
    """Move ``slot`` from ``source`` to ``target`` while clients use it, as the cluster
    tooling reshards: the target IMPORTING, the source MIGRATING (from here a key the source
    no longer holds is answered ASK, a multi-key command over moved and unmoved keys
    TRYAGAIN), the keys MIGRATEd a batch at a time, then every primary told the new owner
    (MOVED from then on). ``between_batches``: a pause after each batch, to hold the ASK
    window open longer. Returns how many keys were moved."""
    source_id, target_id = node_id(source), node_id(target)
    to_source, to_target = _client(source), _client(target)
    moved = 0
    try:
        to_target.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)  # type: ignore[no-untyped-call]
        to_source.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)  # type: ignore[no-untyped-call]
        while batch := to_source.execute_command("CLUSTER", "GETKEYSINSLOT", slot, _BATCH):  # type: ignore[no-untyped-call]
            to_source.execute_command(  # type: ignore[no-untyped-call]
                "MIGRATE", "127.0.0.1", target.port, "", 0, _MIGRATE_TIMEOUT_MS,
                "AUTH", cluster.password, "KEYS", *batch,
            )  # fmt: skip
            moved += len(batch)
            if between_batches:
                time.sleep(between_batches)
        # The target first, so that it serves the slot before the source sends MOVED to it.
        to_target.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)  # type: ignore[no-untyped-call]
        to_source.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)  # type: ignore[no-untyped-call]
        for node in cluster.nodes:
            if node not in (source, target):
                other = _client(node)
                try:
                    other.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)  # type: ignore[no-untyped-call]
                finally:
                    other.close()
    finally:
        to_source.close()
        to_target.close()
    return moved


def owner(cluster: Cluster, slot: int, seen_by: EmbeddedValkey | None = None) -> EmbeddedValkey:
    """The primary serving ``slot`` now, as ``seen_by`` (the seed node by default) sees it."""
    client = _client(seen_by or cluster.seed)
    try:
        shards = client.execute_command("CLUSTER", "SLOTS")  # type: ignore[no-untyped-call]
    finally:
        client.close()
    for low, high, primary, *_ in shards:
        if low <= slot <= high:
            port = int(primary[1])
            return next(node for node in cluster.every if node.port == port)
    raise LookupError(f"no primary serves slot {slot}")
