"""INFO of every server that holds the store: one Redis, or each primary of a cluster.

INFO answers of the server it reaches, and it names no key: a cluster client sends it to
any node, and refuses it in a pipeline. So on a cluster it is asked of each primary, and
the answers merged into one as the checks read it (``merged``): whatever one primary risks,
the store risks (AOF off on one, a policy that evicts on one, a write failed on one), and
memory adds up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import redis.asyncio
from redis.asyncio.cluster import RedisCluster

# Each primary's figure, summed into the store's.
_SUMMED = ("used_memory", "maxmemory")
# 1 only when every primary says 1.
_ALL = ("aof_enabled",)
# "ok" only when every primary says "ok".
_STATUSES = ("aof_last_write_status", "aof_last_bgrewrite_status")


async def store_info(client: redis.asyncio.Redis, *sections: str) -> dict[str, Any]:
    """INFO (its default sections, or ``sections``, each asked alone: naming two in one
    call needs Redis 7.0) of the store, merged over a cluster's primaries."""
    if not isinstance(client, RedisCluster):
        return await _one(client, sections)
    cluster: RedisCluster = client
    answers = await asyncio.gather(
        *(_one(cluster, sections, target) for target in cluster.get_primaries())
    )
    return merged(answers)


async def _one(client: Any, sections: Sequence[str], *target: Any) -> dict[str, Any]:
    # A cluster client takes target_nodes; a plain one does not know the argument.
    options = {"target_nodes": target[0]} if target else {}
    found: dict[str, Any] = {}
    for section in sections or (None,):
        found.update(
            await client.info(section, **options) if section else await client.info(**options)
        )
    return found


def merged(answers: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One INFO for several servers: the first's fields, with the risky ones overridden."""
    if not answers:
        return {}
    result = dict(answers[0])
    for name in _SUMMED:
        if any(name in a for a in answers):
            result[name] = sum(int(a.get(name, 0)) for a in answers)
    for name in _ALL:
        if any(name in a for a in answers):
            result[name] = int(all(int(a.get(name, 0)) == 1 for a in answers))
    for name in _STATUSES:
        statuses = [str(a[name]) for a in answers if name in a]
        if statuses:
            result[name] = next((s for s in statuses if s != "ok"), "ok")
    policies = [str(a["maxmemory_policy"]) for a in answers if "maxmemory_policy" in a]
    if policies:
        result["maxmemory_policy"] = next((p for p in policies if p != "noeviction"), "noeviction")
    return result
