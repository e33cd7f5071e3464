"""What Valkey writes to its append-only file, read from the files themselves.

Valkey 7+ keeps the AOF as a directory: a base file (what the last rewrite wrote), the
incremental files written since (every command that changed data, as the replies went
out), and a manifest naming both. What the commands of a run cost on disk is the growth of
the incremental files the manifest lists, so an AOF rewrite must not run in between: it
starts a new incremental file and drops the old ones (``no_auto_rewrite``, and the
``rewrites`` count taken with the sizes says if one ran all the same).
"""

from __future__ import annotations

import contextlib
import re
import shlex
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import redis


def incremental_files(manifest: str) -> list[str]:
    """The incremental files (``type i``) a manifest lists, in its order; the base file and
    history files (``type h``, being deleted) are not counted."""
    found = []
    for line in manifest.splitlines():
        # `file <name> seq <n> type <b|h|i>`; Valkey quotes a name only if it needs it.
        fields = shlex.split(line)
        pairs = dict(zip(fields[::2], fields[1::2], strict=False))
        if pairs.get("type") == "i" and "file" in pairs:
            found.append(pairs["file"])
    return found


def appendonly_dir(client: redis.Redis) -> Path:
    """Where the server keeps its AOF, as it says itself."""
    directory = str(client.config_get("dir")["dir"])
    return Path(directory) / str(client.config_get("appenddirname")["appenddirname"])


def _incremental_paths(directory: Path) -> list[Path]:
    manifest = next(directory.glob("*.manifest"))
    return [directory / name for name in incremental_files(manifest.read_text())]


def appended_bytes(directory: Path) -> int:
    """Bytes in the incremental AOF files of ``directory``: written since the last rewrite."""
    return sum(path.stat().st_size for path in _incremental_paths(directory))


def appended(directory: Path) -> bytes:
    """The incremental files' contents, one after the other: ``appended_bytes`` long."""
    return b"".join(path.read_bytes() for path in _incremental_paths(directory))


def commands(data: bytes) -> Iterator[tuple[list[bytes], int]]:
    """Each command in AOF bytes (RESP arrays of bulk strings, as Valkey appends them) and
    the bytes it takes there."""
    at = 0
    while at < len(data):
        start = at
        if data[at : at + 1] != b"*":
            raise ValueError(f"not a command at byte {at}")
        end = data.index(b"\r\n", at)
        count, at = int(data[at + 1 : end]), end + 2
        argv = []
        for _ in range(count):
            end = data.index(b"\r\n", at)
            length, at = int(data[at + 1 : end]), end + 2
            argv.append(data[at : at + length])
            at += length + 2
        yield argv, at - start


# Ids and numbers inside key names (a minute, an hour): what varies from one event to the
# next; a single digit (the prefix's schema) stays.
_VARYING = re.compile(rb"(?<=_)[0-9A-Za-z]{6,}|[0-9]{2,}")
# Commands without a key, or whose first argument is no key worth naming.
_KEYLESS = frozenset({b"MULTI", b"EXEC", b"SELECT"})


def kind(argv: list[bytes]) -> str:
    """A command and the shape of its key: ``HSET whs:1:delivery:dlv_*``."""
    name = argv[0].upper()
    if name in _KEYLESS or len(argv) < 2:
        return name.decode()
    return f"{name.decode()} {_VARYING.sub(b'*', argv[1]).decode(errors='replace')}"


def costs(data: bytes, top: int = 25) -> list[dict[str, str | int]]:
    """What takes the bytes of ``data``: the ``top`` kinds of command by bytes, with their
    count, and the rest added up in one more line."""
    count: Counter[str] = Counter()
    size: Counter[str] = Counter()
    for argv, used in commands(data):
        name = kind(argv)
        count[name] += 1
        size[name] += used
    ranked = size.most_common()
    out: list[dict[str, str | int]] = [
        {"kind": name, "count": count[name], "bytes": used} for name, used in ranked[:top]
    ]
    rest = ranked[top:]
    if rest:
        out.append(
            {
                "kind": f"{len(rest)} other kinds",
                "count": sum(count[name] for name, _ in rest),
                "bytes": sum(used for _, used in rest),
            }
        )
    return out


@dataclass(frozen=True)
class Usage:
    """What Valkey has written and spent so far: compare two readings."""

    aof_bytes: int
    cpu_seconds: float  # user + system, as INFO cpu counts them
    rewrites: int  # AOF rewrites it has run (INFO persistence aof_rewrites)

    def __sub__(self, earlier: Usage) -> Usage:
        return Usage(
            self.aof_bytes - earlier.aof_bytes,
            self.cpu_seconds - earlier.cpu_seconds,
            self.rewrites - earlier.rewrites,
        )


def usage(client: redis.Redis) -> Usage:
    cpu = client.info("cpu")
    rewrites = int(client.info("persistence")["aof_rewrites"])
    return Usage(
        appended_bytes(appendonly_dir(client)),
        float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]),
        rewrites,
    )


@contextlib.contextmanager
def no_auto_rewrite(client: redis.Redis) -> Iterator[None]:
    """No automatic AOF rewrite meanwhile (one would reset the files being measured); the
    server's own setting back afterwards."""
    setting = "auto-aof-rewrite-percentage"
    before = str(client.config_get(setting)[setting])
    client.config_set(setting, 0)
    try:
        yield
    finally:
        client.config_set(setting, before)
