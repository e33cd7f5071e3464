"""Redis clients that fail fast instead of hanging, and the start-up checks on the server."""

from __future__ import annotations

import logging
from typing import Any, cast

import redis
import redis.asyncio
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

log = logging.getLogger(__name__)


class ServerUnfit(RuntimeError):
    """The Redis server is configured in a way that could lose accepted events."""


def _options() -> dict[str, Any]:
    return {
        "decode_responses": True,
        "socket_connect_timeout": 2.0,
        "socket_timeout": 5.0,
        "health_check_interval": 15,
    }


def async_client(url: str) -> redis.asyncio.Redis:
    retry = redis.asyncio.retry.Retry(ExponentialBackoff(cap=0.5, base=0.05), 2)
    return redis.asyncio.Redis.from_url(url, retry=retry, **_options())


def sync_client(url: str) -> redis.Redis:
    return redis.Redis.from_url(
        url, retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 2), **_options()
    )


def check_server(client: redis.Redis, durability: str) -> bool:
    """Refuse servers that may evict or drop events. Returns whether WAITAOF is usable."""
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
    # redis-py leaves execute_command untyped; COMMAND INFO answers [nil] for an unknown one.
    info = client.execute_command("COMMAND", "INFO", "WAITAOF")  # type: ignore[no-untyped-call]
    has_waitaof = bool(info and info[0])
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
