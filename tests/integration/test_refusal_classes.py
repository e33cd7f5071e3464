"""Each refusal provoked on a real Valkey and classified as what it is (store/refusals.py):
from a plain command, from one of our Lua scripts run by EVALSHA (a #!lua script is refused
before it runs, or from inside it where the server appends "script: …"), and from redis-py's
health-check PING where that differs.

The clients here never retry, so what a client first meets is what is classified.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.support.store_faults import busy, full, tmpfs
from webhook_service.embedded import EmbeddedValkey, free_port, start_valkey
from webhook_service.store import keys
from webhook_service.store.refusals import Refusal, classify
from webhook_service.store.scripts import Scripts

pytestmark = pytest.mark.integration


def connect(server: EmbeddedValkey | str, **options: Any) -> redis.Redis:
    url = server if isinstance(server, str) else server.url
    return redis.Redis.from_url(url, retry=Retry(NoBackoff(), 0), **options)


def raised(call: Callable[[], object]) -> redis.RedisError:
    try:
        call()
    except redis.RedisError as exc:
        return exc
    raise AssertionError("the store did not refuse")


def a_script_write(client: redis.Redis) -> Callable[[], object]:
    """One of our scripts that writes on every call (a rate-limit step)."""
    scripts = Scripts(client)
    return lambda: scripts.run_sync("ratelimit", [keys.limit("refusal-test")], [1000, 1000])


def assert_classified(refusal: Refusal, *errors: redis.RedisError) -> None:
    found = [(type(e).__name__, str(e), classify(e)) for e in errors]
    assert all(cause is refusal for _, _, cause in found), found


@pytest.fixture
def primary(tmp_path: Path) -> Iterator[EmbeddedValkey]:
    server = start_valkey(tmp_path / "primary")
    yield server
    server.stop()


def test_out_of_memory(primary: EmbeddedValkey) -> None:
    client = connect(primary)
    with full(primary.url):
        # A #!lua script is refused before it runs, with the plain command's reply.
        in_script = raised(a_script_write(client))
        assert_classified(Refusal.OUT_OF_MEMORY, raised(lambda: client.set("k", "v")), in_script)
        assert client.get("k") is None  # reads go on


def test_no_replicas(primary: EmbeddedValkey) -> None:
    client = connect(primary)
    client.config_set("min-replicas-to-write", 1)
    assert_classified(
        Refusal.NO_REPLICAS, raised(lambda: client.set("k", "v")), raised(a_script_write(client))
    )


def test_read_only_replica_then_primary_down(primary: EmbeddedValkey, tmp_path: Path) -> None:
    replica = start_valkey(
        tmp_path / "replica",
        extra=("--replicaof", "127.0.0.1", str(primary.port)),
        password=primary.password,
    )
    try:
        client = connect(replica)
        assert_classified(
            Refusal.READ_ONLY, raised(lambda: client.set("k", "v")), raised(a_script_write(client))
        )
        client.config_set("replica-serve-stale-data", "no")
        primary.kill()
        deadline = time.monotonic() + 30
        while client.info("replication")["master_link_status"] != "down":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert_classified(Refusal.PRIMARY_DOWN, raised(lambda: client.get("k")))
        # A replica refuses a writing #!lua script before it runs, whatever its link.
        assert_classified(Refusal.READ_ONLY, raised(a_script_write(client)))
    finally:
        replica.stop()


def test_busy_with_another_script(primary: EmbeddedValkey) -> None:
    client = connect(primary)
    with busy(primary.url):
        assert_classified(
            Refusal.BUSY, raised(lambda: client.get("k")), raised(a_script_write(client))
        )


def test_loading_after_a_start(primary: EmbeddedValkey) -> None:
    client = connect(primary)
    with client.pipeline(transaction=False) as pipe:
        for n in range(20_000):
            pipe.set(f"k{n}", "v")
        pipe.execute()
    time.sleep(1.2)  # appendfsync everysec
    primary.kill()
    # Replaying 20 000 keys at 50 µs each takes seconds, served LOADING meanwhile.
    restarting = threading.Thread(
        target=start_valkey,
        args=(primary.directory, primary.port),
        kwargs={"extra": ("--key-load-delay", "50")},
    )
    restarting.start()
    found: list[redis.RedisError] = []
    try:
        while restarting.is_alive() and not found:
            try:
                connect(primary, socket_timeout=2).get("k1")
            except redis.exceptions.BusyLoadingError as exc:
                found.append(exc)
            except redis.exceptions.ConnectionError:
                time.sleep(0.02)  # not listening yet
    finally:
        restarting.join()
        connect(primary).shutdown(nosave=True)
    assert found, "never saw the server loading"
    assert_classified(Refusal.LOADING, *found)


def test_disk_error_when_the_aof_cannot_be_written(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", "2m") as disk:
        server = start_valkey(disk / "valkey")
        try:
            client = connect(server, health_check_interval=1)
            first = raised(lambda: _fill(client))
            # A read on a connection idle past its health check: the PING before it is refused.
            time.sleep(1.1)
            idle_read = raised(lambda: client.get("k"))
            assert_classified(
                Refusal.DISK_ERROR,
                first,
                idle_read,
                raised(lambda: client.set("k", "v")),
                raised(a_script_write(client)),
            )
        finally:
            server.kill()


def _fill(client: redis.Redis) -> None:
    for n in range(1_000_000):
        client.set(f"fill{n}", "x" * 1000)


def test_closed_and_timed_out_connections(primary: EmbeddedValkey) -> None:
    # Closed by the server under a command in flight (an idle one the pool would reopen).
    closed: list[redis.RedisError] = []
    waiting = threading.Thread(
        target=lambda: closed.append(raised(lambda: connect(primary).blpop(["nothing"], 5)))
    )
    waiting.start()
    time.sleep(0.5)
    connect(primary).client_kill_filter(_type="normal", skipme=True)
    waiting.join()
    refused = raised(lambda: connect(f"redis://127.0.0.1:{free_port()}/0").get("k"))
    assert_classified(Refusal.CONNECTION, *closed, refused)
    slow = connect(primary, socket_timeout=0.2)
    assert_classified(Refusal.TIMEOUT, raised(lambda: slow.blpop(["nothing"], 2)))


def test_errors_of_other_kinds_are_not_refusals(primary: EmbeddedValkey) -> None:
    client = connect(primary)
    client.rpush("list", "x")
    wrong = [
        raised(lambda: client.get("list")),  # WRONGTYPE
        raised(lambda: client.evalsha("0" * 40, 0)),  # NOSCRIPT
        raised(lambda: client.fcall("no_such_function", 0)),  # Function not found
        raised(lambda: client.eval("return redis.call('NO-SUCH-COMMAND')", 0)),
        raised(lambda: client.eval("return redis.call('INCR', KEYS[1])", 1, "list")),
    ]
    assert [classify(e) for e in wrong] == [None] * 5, [str(e) for e in wrong]
