"""The embedded Valkey is its owner's alone: other local users can neither use it (it needs
the password, which is in no command line) nor read its files (the password, the AOF)."""

from __future__ import annotations

import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from webhook_service.embedded import PASSWORD_FILE, EmbeddedValkey, jemalloc, start_valkey

pytestmark = pytest.mark.integration


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedValkey]:
    running = start_valkey(tmp_path / "valkey")
    yield running
    running.stop()


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_client_without_the_password_is_refused(server: EmbeddedValkey) -> None:
    with (
        redis.Redis(port=server.port) as anonymous,
        pytest.raises(redis.AuthenticationError),
    ):
        anonymous.hset("whk:apikey:x", "scopes", "admin")
    with redis.Redis.from_url(server.url) as owner:
        assert owner.hset("whk:apikey:x", "scopes", "admin") == 1


def test_the_password_is_on_no_command_line(server: EmbeddedValkey) -> None:
    # Both what it was started with and what ps shows now (Valkey rewrites its title).
    assert server.password not in str(server.process.args)
    cmdline = Path(f"/proc/{server.process.pid}/cmdline").read_bytes()
    assert server.password.encode() not in cmdline
    assert len(server.password) >= 32


def test_the_dir_and_everything_in_it_are_private(tmp_path: Path) -> None:
    directory = tmp_path / "valkey"
    directory.mkdir(mode=0o755)  # as an older version left it: made private at start
    server = start_valkey(directory)
    try:
        with redis.Redis.from_url(server.url) as client:
            for n in range(100):
                client.set(f"payload:{n}", "x" * 100)
            client.bgrewriteaof()  # a new base file, a new incr file, a new manifest
            while _rewriting(client):
                time.sleep(0.05)
    finally:
        server.stop()
    files = [path for path in directory.rglob("*") if path.is_file()]
    assert directory / PASSWORD_FILE in files
    assert directory / "appendonlydir" / "appendonly.aof.manifest" in files
    assert any(path.name.endswith(".base.rdb") for path in files)
    wrong = {
        str(path): oct(_mode(path))
        for path in [directory, *directory.rglob("*")]
        if _mode(path) != (0o700 if path.is_dir() else 0o600)
    }
    assert wrong == {}


def _rewriting(client: redis.Redis) -> bool:
    persistence = client.info("persistence")
    return bool(persistence["aof_rewrite_in_progress"] or persistence["aof_rewrite_scheduled"])


def test_a_restart_on_the_same_dir_keeps_the_password_and_the_data(
    server: EmbeddedValkey,
) -> None:
    with redis.Redis.from_url(server.url) as client:
        client.hset("whk:apikey:y", "scopes", "events:write")
        client.execute_command("WAITAOF", 1, 0, 5000)  # on disk before the kill
    server.kill()
    again = start_valkey(server.directory, server.port)
    try:
        assert (again.password, again.url) == (server.password, server.url)
        with redis.Redis.from_url(again.url, decode_responses=True) as client:
            assert client.hget("whk:apikey:y", "scopes") == "events:write"
    finally:
        again.stop()


def test_a_given_password_must_be_url_safe(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="URL-safe"):
        start_valkey(tmp_path / "valkey", password="not url safe")


def _maps_jemalloc(server: EmbeddedValkey) -> bool:
    return "libjemalloc" in Path(f"/proc/{server.process.pid}/maps").read_text()


def test_it_runs_on_jemalloc_unless_told_not_to(server: EmbeddedValkey, tmp_path: Path) -> None:
    # `make test` installs Debian's libjemalloc2 where it is missing.
    assert jemalloc() is not None
    assert _maps_jemalloc(server)
    plain = start_valkey(tmp_path / "plain", preload_jemalloc=False)
    try:
        assert not _maps_jemalloc(plain)
        # Valkey counts its memory with malloc_usable_size, jemalloc's now: it adds up.
        with redis.Redis.from_url(server.url) as client:
            before = client.info("memory")["used_memory"]
            client.set("big", "x" * 4_000_000)
            assert client.info("memory")["used_memory"] - before >= 4_000_000
    finally:
        plain.stop()
