"""How much memory the stack's processes hold, sampled over a long run, and how it grew.

RSS comes from ``/proc/<pid>/status`` (``VmRSS``, read by bench/procs.py). A prefork Celery
worker is a main process and its pool children, so a part's RSS is the sum over the process
and its descendants (the process group the stack starts it in); Valkey is one process (an
AOF rewrite's child is left out). Valkey's own view: ``used_memory`` (INFO memory) in all,
``mem_clients_normal`` of it the connections' buffers, and the keys themselves, ``MEMORY
USAGE`` summed over a SCAN. The keys are what retention must let go; the rest also grows
with the connections the clients' pools hold open (up to 100 a process), a few KiB each.
"""

from __future__ import annotations

import csv
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import redis.asyncio

from bench.procs import process_tree, status_bytes
from tests.support.stack import VALKEY, Stack

# Valkey's figures, each a part of its own in the samples: KiB, but for the clients' count.
USED_MEMORY = "redis used_memory"
CLIENTS_MEMORY = "redis mem_clients_normal"
KEYS_MEMORY = "redis keys"
CLIENTS = "redis connected_clients"
REDIS_FIGURES = (USED_MEMORY, CLIENTS_MEMORY, KEYS_MEMORY, CLIENTS)


def rss_kib(pid: int, *, descendants: bool = True) -> int | None:
    """RSS in KiB of ``pid`` and (by default) its live descendants: a prefork worker's pool
    children are its descendants. None once it is gone."""
    pids = process_tree(pid) if descendants else [pid]
    total = sum(status_bytes(each) for each in pids) // 1024
    return total or None


async def keys_bytes(client: redis.asyncio.Redis) -> int:
    """What every key takes, by ``MEMORY USAGE`` (estimated from samples for large sets)."""
    total = 0
    async for batch in _key_batches(client):
        async with client.pipeline(transaction=False) as pipe:
            for name in batch:
                pipe.memory_usage(name)
            total += sum(size or 0 for size in await pipe.execute())
    return total


async def _key_batches(client: redis.asyncio.Redis) -> AsyncIterator[list[bytes | str]]:
    cursor = 0
    while True:
        cursor, batch = await client.scan(cursor, count=1000)
        yield batch
        if cursor == 0:
            return


async def redis_figures(client: redis.asyncio.Redis) -> dict[str, int] | None:
    """Valkey's figures, KiB (the clients' count as is); None while Valkey does not answer."""
    try:
        memory = await client.info("memory")
        clients = await client.info("clients")
        keys = await keys_bytes(client)
    except (redis.RedisError, OSError):
        return None
    return {
        USED_MEMORY: int(memory["used_memory"]) // 1024,
        CLIENTS_MEMORY: int(memory["mem_clients_normal"]) // 1024,
        KEYS_MEMORY: keys // 1024,
        CLIENTS: int(clients["connected_clients"]),
    }


@dataclass(frozen=True)
class Sample:
    at: float  # seconds since the load began (negative before it)
    phase: str
    part: str  # a process's name (RSS), "valkey" (RSS), or one of Valkey's figures
    pid: int
    value: int  # KiB, but for the clients' count
    load1: float  # the machine's load average then: the figures are from a shared machine


@dataclass
class Samples:
    began: float = field(default_factory=time.monotonic)
    phase: str = "idle"
    rows: list[Sample] = field(default_factory=list)

    def take(self, stack: Stack, figures: dict[str, int] | None) -> None:
        at = time.monotonic() - self.began
        load1 = os.getloadavg()[0]
        valkey = stack.valkey.process.pid
        parts = [(name, p.pid, rss_kib(p.pid)) for name, p in dict(stack.processes).items()]
        # The server alone: an AOF rewrite's child shares its pages for a while.
        parts.append((VALKEY, valkey, rss_kib(valkey, descendants=False)))
        parts += [(name, valkey, value) for name, value in (figures or {}).items()]
        for part, pid, value in parts:
            if value is not None:
                self.rows.append(Sample(at, self.phase, part, pid, value, load1))

    def of(self, part: str, phase: str) -> list[int]:
        return [s.value for s in self.rows if s.part == part and s.phase == phase]

    def write(self, path: Path) -> None:
        with path.open("w", newline="") as out:
            writer = csv.writer(out)
            writer.writerow(["t_s", "phase", "part", "pid", "value", "load1"])
            for s in self.rows:
                writer.writerow([f"{s.at:.0f}", s.phase, s.part, s.pid, s.value, f"{s.load1:.2f}"])


@dataclass(frozen=True)
class Growth:
    part: str
    pid: int
    warm_kib: int  # the sample at the end of the warm-up
    last_kib: int
    peak_kib: int  # the largest sample after the warm-up
    lived: float  # seconds sampled after the warm-up

    @property
    def ratio(self) -> float:
        return self.last_kib / self.warm_kib - 1


def rss_growth(samples: Samples, warm_up: float) -> list[Growth]:
    """Per process of ours (a name and a pid: a restart makes a new one), the RSS from the
    end of its warm-up (``warm_up`` seconds into the load, or into its own life if it started
    later) to its last sample. A process sampled for less than two warm-ups after its own is
    left out: too short to tell growth from warming."""
    lives: dict[tuple[str, int], list[Sample]] = {}
    for s in samples.rows:
        if s.part != VALKEY and s.part not in REDIS_FIGURES and s.phase != "idle":
            lives.setdefault((s.part, s.pid), []).append(s)
    growths = []
    for (part, pid), life in lives.items():
        warm_at = max(0.0, life[0].at) + warm_up
        warm = next((s for s in life if s.at >= warm_at), None)
        if warm is None or life[-1].at - warm.at < 2 * warm_up:
            continue
        peak = max(s.value for s in life if s.at >= warm.at)
        growths.append(Growth(part, pid, warm.value, life[-1].value, peak, life[-1].at - warm.at))
    return growths
