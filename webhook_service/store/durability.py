"""Strict durability's confirmation (WEBHOOK_DURABILITY=strict): an accepted event is on its
primary's disk, and in a replica's memory wherever a failover could promote one, before the
API answers 202.

WAITAOF and WAIT wait for the last write of *their own* connection, and a pool may hand out
another connection than the one the ingest wrote on. So the wait first sends a publish on
that same connection (replicated, stored nowhere): it moves the connection's offset past the
event's, whichever connection wrote the event. A replica's memory, not its disk, is what a
failover needs: WAITAOF's replica count would wait for the replica's own fsync, up to a
second under its appendfsync everysec.

On a cluster every step must reach the primary of the event's bucket, which a keyless
command would not (a cluster client sends it to any node): the wait holds one connection of
that primary, and writes there the bucket's mark, a key, since a publish would not do: on a
cluster it reaches the shard's other nodes over the cluster bus, not the replication stream,
and moves no offset WAIT or WAITAOF look at. It also asks the primary (ROLE) whether it has
a replica to wait for, since that changes with failovers (a promoted replica has none until
the old primary comes back as its replica).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio
import redis.asyncio.cluster
from redis.asyncio.connection import Connection

from webhook_service.store import keys

# How long each wait may last on the server, in milliseconds.
TIMEOUT_MS = 2000
# Waits at once on one primary of a cluster. Under appendfsync everysec a wait holds its
# connection until the next fsync, up to a second, and redis-py's cluster pool refuses a
# connection past its size rather than queue for one: the waits queue here instead, and
# leave the rest of each pool (store/connect.py, 100 a node) to the other commands.
SHARD_WAITS = 50


@dataclass
class _Shard:
    """What the waits on one primary of a cluster share."""

    waits: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(SHARD_WAITS))
    # Replicas attached (0 or 1) at its last wait; None before the first. Known, the WAIT
    # goes in the same round trip as the rest; else, or when it was 0 and one is attached
    # now, it follows as a second.
    replicas: int | None = None


@dataclass(frozen=True)
class StrictDurability:
    client: redis.asyncio.Redis
    # Outside a cluster: replicas that must also hold the event (store/connect.py
    # replicas_to_confirm, once at start). On a cluster each primary is asked at each wait.
    replicas: int
    _shards: dict[str, _Shard] = field(default_factory=dict)

    async def confirm(self, bucket: int) -> bool:
        """Whether the last write to ``bucket`` is on disk (and in a replica where one could
        be promoted); False once a wait runs out or the primary has changed."""
        if isinstance(self.client, redis.asyncio.cluster.RedisCluster):
            return await self._confirm_on_shard(self.client, bucket)
        pipe = self.client.pipeline(transaction=False)
        pipe.publish(keys.DURABILITY_MARK, "")
        pipe.execute_command("WAITAOF", 1, 0, TIMEOUT_MS)
        pipe.execute_command("WAIT", self.replicas, TIMEOUT_MS)
        _, (local, _), replicas = await pipe.execute()
        return int(local) >= 1 and int(replicas) >= self.replicas

    async def _confirm_on_shard(
        self, client: redis.asyncio.cluster.RedisCluster, bucket: int
    ) -> bool:
        mark = keys.durability_mark(bucket)
        # The slot table, read if the client has not yet, or again if a lost node marked it
        # stale (a no-op otherwise).
        await client.initialize()
        node = client.get_node_from_key(mark)
        if node is None:
            return False
        shard = self._shards.setdefault(node.name, _Shard())
        async with shard.waits:
            return await _wait_on(node, mark, shard)


async def _wait_on(node: redis.asyncio.cluster.ClusterNode, mark: str, shard: _Shard) -> bool:
    # One connection for every step (see the module's docstring): redis-py's cluster node
    # lends it out; its commands alone would each take any free one.
    connection = node.acquire_connection()
    known = shard.replicas
    steps: list[tuple[Any, ...]] = [("ROLE",), ("SET", mark, ""), ("WAITAOF", 1, 0, TIMEOUT_MS)]
    if known:
        steps.append(("WAIT", known, TIMEOUT_MS))
    try:
        role, _, (local, _), *waited = await _round_trip(connection, *steps)
        if role[0] != "master" or int(local) < 1:
            return False  # a failover since the ingest, or the disk too slow: say so
        # No replica connected: none to promote either. (A WAIT sent for one that has
        # just gone ran out, and the disk alone stands.)
        shard.replicas = 1 if role[2] else 0
        if not shard.replicas:
            return True
        if not waited:
            waited = await _round_trip(connection, ("WAIT", 1, TIMEOUT_MS))
        return int(waited[0]) >= 1
    except redis.exceptions.ResponseError:
        return False  # MOVED: the slot has another primary now
    except BaseException:
        # Cut off mid-reply (a timeout, a dead primary): its unread answers must not meet
        # the connection's next user.
        await connection.disconnect()
        raise
    finally:
        node.release(connection)


async def _round_trip(connection: Connection, *commands: tuple[Any, ...]) -> list[Any]:
    """Every command's reply, each read even after one is an error (so that the connection
    stays in step); then the first error, if any."""
    await connection.send_packed_command(connection.pack_commands(commands))
    replies: list[Any] = []
    for _ in commands:
        try:
            replies.append(await connection.read_response())
        except redis.exceptions.ResponseError as error:
            replies.append(error)
    for reply in replies:
        if isinstance(reply, redis.exceptions.ResponseError):
            raise reply
    return replies
