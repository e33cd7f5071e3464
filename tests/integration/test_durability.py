"""Start-up checks on the Redis server: strict durability needs WAITAOF or fsync always,
and a server that may evict is refused. Real servers, each with the one setting changed."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from webhook_service.embedded import EmbeddedValkey, start_valkey
from webhook_service.store.connect import ServerUnfit, check_server, sync_client

pytestmark = pytest.mark.integration


@pytest.fixture
def server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[redis.Redis]:
    extra: tuple[str, ...] = getattr(request, "param", ())
    valkey: EmbeddedValkey = start_valkey(tmp_path / "valkey", extra=extra)
    client = sync_client(valkey.url)
    yield client
    client.close()
    valkey.stop()


def test_strict_mode_uses_waitaof_where_the_server_has_it(server: redis.Redis) -> None:
    assert check_server(server, "strict") is True
    assert check_server(server, "everysec") is False


# Renaming a command to "" removes it: a server as old as Redis 7.0, without WAITAOF.
NO_WAITAOF = ("--rename-command", "WAITAOF", "")


@pytest.mark.parametrize("server", [NO_WAITAOF], indirect=True)
def test_strict_mode_is_refused_without_waitaof_or_fsync_always(server: redis.Redis) -> None:
    with pytest.raises(ServerUnfit, match="appendfsync always"):
        check_server(server, "strict")
    assert check_server(server, "everysec") is False


@pytest.mark.parametrize("server", [(*NO_WAITAOF, "--appendfsync", "always")], indirect=True)
def test_strict_mode_without_waitaof_relies_on_fsync_always(
    server: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        assert check_server(server, "strict") is False
    assert "appendfsync always" in caplog.text


@pytest.mark.parametrize("server", [("--maxmemory-policy", "allkeys-lru")], indirect=True)
def test_a_server_that_may_evict_is_refused(server: redis.Redis) -> None:
    with pytest.raises(ServerUnfit, match="noeviction"):
        check_server(server, "everysec")


@pytest.mark.parametrize("server", [("--appendonly", "no")], indirect=True)
def test_aof_off_is_a_loud_warning(server: redis.Redis, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        check_server(server, "everysec")
    assert "AOF is off" in caplog.text
