"""Redis clients that fail fast instead of hanging, and the start-up checks on the server."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.sentinel
import redis.cluster
import redis.sentinel
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from webhook_service.config import Settings
from webhook_service.store.redis_url import ClusterUrl, parse_cluster, parse_sentinel

log = logging.getLogger(__name__)


class ServerUnfit(RuntimeError):
    """The Redis server is configured in a way that could lose accepted events."""


@dataclass(frozen=True)
class RedisTimeouts:
    """Every wait of a Redis client, in seconds (the ``WEBHOOK_REDIS_*`` settings)."""

    connect: float
    socket: float
    health_check_interval: float
    pool: float  # for a free pooled connection; then the request fails as if Redis were down

    @classmethod
    def of(cls, settings: Settings) -> RedisTimeouts:
        return cls(
            settings.redis_connect_timeout,
            settings.redis_socket_timeout,
            settings.redis_health_check_interval,
            settings.redis_pool_timeout,
        )

    def options(self) -> dict[str, Any]:
        return {
            "decode_responses": True,
            "socket_connect_timeout": self.connect,
            "socket_timeout": self.socket,
            "health_check_interval": self.health_check_interval,
        }


# The settings' defaults, for callers that have no settings of their own (one-shot commands,
# tests): the defaults of the class itself, never the environment.
DEFAULT_TIMEOUTS = RedisTimeouts.of(Settings.model_construct())

_POOL_SIZE = 100
# Two quick retries, for a connection refused or reset (a restart, a failover), never after a
# timeout: the wait has been spent already, and the command may have run on the server.
_RETRIES = 2
_RETRY_ON = (redis.exceptions.ConnectionError,)


def _backoff() -> ExponentialBackoff:
    return ExponentialBackoff(cap=0.5, base=0.05)


def async_client(url: str, timeouts: RedisTimeouts = DEFAULT_TIMEOUTS) -> redis.asyncio.Redis:
    retry = redis.asyncio.retry.Retry(_backoff(), _RETRIES, supported_errors=_RETRY_ON)
    cluster = parse_cluster(url)
    if cluster is not None:
        return _async_cluster(cluster, retry, timeouts)
    sentinel = parse_sentinel(url)
    if sentinel is None:
        # Blocking: under a burst, a request waits its turn for a connection rather than
        # failing at once when all of them are busy (redis-py's default pool raises).
        pool = redis.asyncio.BlockingConnectionPool.from_url(
            url,
            retry=retry,
            max_connections=_POOL_SIZE,
            timeout=timeouts.pool,
            **timeouts.options(),
        )
        # from_url picks the class from the scheme (TCP, TLS, unix socket).
        pool.connection_class = _closed_transport_is_lost(pool.connection_class)
        return redis.asyncio.Redis.from_pool(pool)
    # The sentinels get the same socket timeouts (redis-py passes the socket_* options on),
    # and every new connection asks them where the primary is now: after a failover, the
    # next retry lands on the promoted replica.
    manager = redis.asyncio.sentinel.Sentinel(sentinel.sentinels, **timeouts.options())
    primary = manager.master_for(
        sentinel.service_name,
        retry=retry,
        connection_class=_closed_transport_is_lost(
            redis.asyncio.sentinel.SentinelManagedConnection
        ),
        **sentinel.primary_options(),
    )
    return cast(redis.asyncio.Redis, primary)


_Connection = TypeVar("_Connection", bound=redis.asyncio.connection.AbstractConnection)


def _closed_transport_is_lost(base: type[_Connection]) -> type[_Connection]:
    """``base`` whose write on a transport already closed is a connection lost.

    Under uvloop, writing on a connection the peer has reset raises RuntimeError ("the
    handler is closed"), where the standard loop's transport drops the bytes and the read
    that follows fails with ConnectionError. redis-py maps only OSError, so the RuntimeError
    would reach the handler as a bare 500; as a ConnectionError it is retried on a fresh
    connection (the command never left) and, if Redis stays away, answered 503.
    """

    class ClosedTransportIsLost(base):  # type: ignore[valid-type,misc]
        async def send_packed_command(self, *args: Any, **kwargs: Any) -> None:
            try:
                await super().send_packed_command(*args, **kwargs)
            except RuntimeError as error:  # redis-py has disconnected it already
                raise _lost(error) from error

    ClosedTransportIsLost.__name__ = f"ClosedTransportIsLost{base.__name__}"
    return cast(type[_Connection], ClosedTransportIsLost)


def _lost(error: RuntimeError) -> redis.exceptions.ConnectionError:
    return redis.exceptions.ConnectionError(f"writing to Redis: {error}")


def sync_client(url: str, timeouts: RedisTimeouts = DEFAULT_TIMEOUTS) -> redis.Redis:
    retry = Retry(_backoff(), _RETRIES, supported_errors=_RETRY_ON)
    cluster = parse_cluster(url)
    if cluster is not None:
        return _sync_cluster(cluster, retry, timeouts)
    sentinel = parse_sentinel(url)
    if sentinel is None:
        return redis.Redis.from_url(url, retry=retry, **timeouts.options())
    manager = redis.sentinel.Sentinel(sentinel.sentinels, **timeouts.options())
    primary = manager.master_for(sentinel.service_name, retry=retry, **sentinel.primary_options())
    return cast(redis.Redis, primary)


# A cluster client stands in for a Redis one: it answers the same commands, one key's (or
# one slot's) at a time, and the code that must differ (scripts.py, the scans, the checks
# below) asks ``is_cluster``. redis-py's cluster classes share no base with Redis.
def _async_cluster(
    url: ClusterUrl, retry: redis.asyncio.retry.Retry, timeouts: RedisTimeouts
) -> redis.asyncio.Redis:
    client = _SettlingCluster(
        startup_nodes=[redis.asyncio.cluster.ClusterNode(h, p) for h, p in url.nodes],
        retry=retry,
        max_connections=_POOL_SIZE,  # per node
        # Each MOVED patches the slot table from its answer. By default every 5th MOVED
        # also closes every connection of every node, those other requests are using too:
        # after a reshard, the requests in flight on the moved slots all meet MOVED, and
        # some then fail with a connection torn away under them (AttributeError).
        reinitialize_steps=0,
        **url.node_options(),
        **timeouts.options(),
    )
    return cast(redis.asyncio.Redis, client)


# How long a command waits, in all, for a slot being moved (a reshard takes seconds).
SETTLE_S = 10.0
SETTLE_FIRST_S = 0.02
SETTLE_MAX_S = 0.25


def settle_pauses() -> Iterator[float]:
    """The pauses between tries of a command on a slot being moved: doubling from
    SETTLE_FIRST_S up to SETTLE_MAX_S, SETTLE_S in all. The try after the last pause is the
    caller's final one, whose error goes out."""
    pause, deadline = SETTLE_FIRST_S, time.monotonic() + SETTLE_S
    while time.monotonic() + pause <= deadline:
        yield pause
        pause = min(pause * 2, SETTLE_MAX_S)


def settling(error: Exception) -> bool:
    """redis-py's "TTL exhausted": every one of its tries was refused with a redirect or
    TRYAGAIN, so the command never ran and may go again."""
    return isinstance(error, redis.exceptions.ClusterError) and "TTL exhausted" in str(error)


class _SettlingCluster(redis.asyncio.cluster.RedisCluster):
    """A command on a slot being moved tries again, with a pause, until the move is over.
    redis-py's async client sends the ASKING that must precede a command redirected by ASK
    as a command of its own, on whichever pooled connection is free: under concurrency the
    command often goes on another one, the target answers MOVED back to the source, which
    answers ASK again, until redis-py gives up after 16 tries within milliseconds."""

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        for pause in settle_pauses():
            try:
                return await self._once(*args, **kwargs)
            except redis.exceptions.ClusterError as error:
                if not settling(error):
                    raise
            await asyncio.sleep(pause)
        return await self._once(*args, **kwargs)

    async def _once(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().execute_command(*args, **kwargs)
        except RuntimeError as error:
            # uvloop's write on a closed transport (_closed_transport_is_lost): redis-py's
            # cluster client builds its node connections from a class of its own choosing.
            raise _lost(error) from error
        except AttributeError as error:
            # When a refresh of the slot table fails (a primary just died, its replica not
            # yet promoted), redis-py closes every connection of every node, those that
            # other commands are using too; such a command then meets its connection's
            # stream gone (None). It is a connection lost, and is answered as one (503).
            raise redis.exceptions.ConnectionError(
                "the connection was closed under the command (the cluster's topology changed)"
            ) from error


class _SettlingSyncCluster(redis.cluster.RedisCluster):
    """The same for the processes' blocking clients (the worker's Celery side, the
    scheduler, the commands): redis-py turns a TRYAGAIN its tries could not outlast into
    "TTL exhausted" here too."""

    # redis-py leaves the sync cluster's execute_command untyped.
    def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        for pause in settle_pauses():
            try:
                return super().execute_command(*args, **kwargs)  # type: ignore[no-untyped-call]
            except redis.exceptions.ClusterError as error:
                if not settling(error):
                    raise
            time.sleep(pause)
        return super().execute_command(*args, **kwargs)  # type: ignore[no-untyped-call]


def _sync_cluster(url: ClusterUrl, retry: Retry, timeouts: RedisTimeouts) -> redis.Redis:
    client = _SettlingSyncCluster(
        # redis-py leaves the sync ClusterNode untyped.
        startup_nodes=[redis.cluster.ClusterNode(h, p) for h, p in url.nodes],  # type: ignore[no-untyped-call]
        retry=retry,
        **url.node_options(),
        **timeouts.options(),
    )
    return cast(redis.Redis, client)


def is_cluster(client: object) -> bool:
    return isinstance(client, redis.cluster.RedisCluster | redis.asyncio.cluster.RedisCluster)


def primaries(client: redis.Redis) -> list[redis.Redis]:
    """A plain client of each primary of a cluster (sharing its pools), or ``client`` itself:
    for what each server answers of itself (INFO, CONFIG) or holds (SCAN)."""
    if not isinstance(client, redis.cluster.RedisCluster):
        return [client]
    return [client.get_redis_connection(node) for node in client.get_primaries()]


def replicas_to_confirm(client: redis.Redis, url: str) -> int:
    """How many replicas a strict-mode write must reach besides the primary's disk.

    One whenever a failover could promote a replica (always, under Sentinel): it would
    otherwise promote one that may not have the write yet. On a cluster, none here: each
    wait asks the bucket's primary itself (store/durability.py).
    """
    if is_cluster(client):
        return 0
    if parse_sentinel(url) is not None:
        return 1
    replication = client.info("replication")
    return 1 if int(replication.get("connected_slaves", 0)) > 0 else 0


def check_server(client: redis.Redis, durability: str) -> bool:
    """Refuse servers that may evict or drop events (on a cluster, any primary that may).
    Returns whether WAITAOF is usable (on every primary)."""
    usable = [_check_one(server, durability) for server in primaries(client)]
    return all(usable)


def _check_one(client: redis.Redis, durability: str) -> bool:
    memory = client.info("memory")
    policy = memory.get("maxmemory_policy", "noeviction")
    if policy != "noeviction":
        raise ServerUnfit(
            f"maxmemory-policy is {policy!r}: Redis could evict accepted events. "
            "Set it to 'noeviction'."
        )
    persistence = client.info("persistence")
    if not int(persistence.get("aof_enabled", 0)):
        log.warning("AOF is off on this Redis: a crash of the server loses accepted events")
    if durability != "strict":
        return False
    try:
        # Waits for nothing (0 local, 0 replicas): only asks whether the command exists.
        client.execute_command("WAITAOF", 0, 0, 1)  # type: ignore[no-untyped-call]
        has_waitaof = True
    except redis.ResponseError:
        has_waitaof = False
    if has_waitaof:
        return True
    fsync = _config_get(client, "appendfsync")
    if fsync == "always":
        log.warning("no WAITAOF on this server; strict mode relies on appendfsync always")
        return False
    raise ServerUnfit(
        "WEBHOOK_DURABILITY=strict needs WAITAOF (Redis >= 7.2 or Valkey) or a server running "
        "'appendfsync always'; this one has neither."
    )


def _config_get(client: redis.Redis, name: str) -> str | None:
    try:
        value = cast(dict[str, str], client.config_get(name))
    except redis.ResponseError:
        return None  # managed services often forbid CONFIG
    return value.get(name)
