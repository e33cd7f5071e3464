"""Every Redis client gives up on a dead link after its configured waits, once.

A blackhole (tests/support/fault_proxy.py) between a client and a real Valkey: a command
fails after one socket timeout, never three (redis-py retries timeouts unless told not
to), and a Celery publish fails after its socket timeout rather than waiting forever
(kombu's default). A connection the network reset is still retried at once, on a new
connection. tests/chaos/test_network_faults.py drives the whole service through the same
faults.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
import redis

from tests.support.fault_proxy import Fault, FaultProxy
from webhook_service.config import Settings
from webhook_service.embedded import EmbeddedValkey
from webhook_service.store.connect import RedisTimeouts, async_client, sync_client
from webhook_service.store.keys import QUEUE_FRESH
from webhook_service.wakeup import TASK_DELIVER
from workers.celery_app import make_app

TIMEOUTS = RedisTimeouts(connect=0.5, socket=1.0, health_check_interval=1.0, pool=0.5)
# What a busy machine adds; under one more socket timeout, so a retried timeout fails.
MARGIN_S = 0.8


@pytest.fixture
def proxy(valkey: EmbeddedValkey) -> Iterator[FaultProxy]:
    running = FaultProxy("127.0.0.1", valkey.port, latency=0.0).start()
    yield running
    running.close()


async def test_an_async_command_on_a_dead_link_fails_after_one_socket_timeout(
    valkey: EmbeddedValkey, proxy: FaultProxy
) -> None:
    client = async_client(proxy.redirect(valkey.url), TIMEOUTS)
    await client.ping()
    proxy.set(Fault.BLACKHOLE)
    started = time.monotonic()
    with pytest.raises(redis.TimeoutError):
        await client.set("whs:test:dead-link", 1)
    waited = time.monotonic() - started
    assert TIMEOUTS.socket <= waited <= TIMEOUTS.socket + MARGIN_S, waited
    proxy.set(Fault.NONE)
    assert await client.ping()  # the dead connection was dropped, a new one works
    await client.aclose()


def test_a_sync_command_on_a_dead_link_fails_after_one_socket_timeout(
    valkey: EmbeddedValkey, proxy: FaultProxy
) -> None:
    client = sync_client(proxy.redirect(valkey.url), TIMEOUTS)
    client.ping()
    proxy.set(Fault.BLACKHOLE)
    started = time.monotonic()
    with pytest.raises(redis.TimeoutError):
        client.set("whs:test:dead-link", 1)
    waited = time.monotonic() - started
    assert TIMEOUTS.socket <= waited <= TIMEOUTS.socket + MARGIN_S, waited
    proxy.set(Fault.NONE)
    assert client.ping()
    client.close()


async def test_a_reset_connection_is_retried_on_a_new_one(
    valkey: EmbeddedValkey, proxy: FaultProxy
) -> None:
    client = async_client(proxy.redirect(valkey.url), TIMEOUTS)
    await client.ping()
    proxy.set(Fault.RESET)  # the pooled connection is reset...
    proxy.set(Fault.NONE)  # ...and the network works again
    assert await client.set("whs:test:reset", 1)
    await client.aclose()


def test_a_publish_on_a_dead_link_fails_after_its_socket_timeout(
    valkey: EmbeddedValkey, proxy: FaultProxy
) -> None:
    settings = Settings(
        redis_url=proxy.redirect(valkey.url),
        redis_connect_timeout=TIMEOUTS.connect,
        redis_socket_timeout=TIMEOUTS.socket,
        redis_health_check_interval=TIMEOUTS.health_check_interval,
    )
    app = make_app(settings)
    app.send_task(TASK_DELIVER, args=["dlv_none"], queue=QUEUE_FRESH, retry=False)
    proxy.set(Fault.BLACKHOLE)
    failed: list[BaseException] = []

    def publish() -> None:
        try:
            app.send_task(TASK_DELIVER, args=["dlv_none"], queue=QUEUE_FRESH, retry=False)
        except Exception as exc:
            failed.append(exc)

    started = time.monotonic()
    publisher = threading.Thread(target=publish, daemon=True)
    publisher.start()
    # Without a socket timeout, kombu would wait here forever: the thread is left behind.
    publisher.join(TIMEOUTS.socket + MARGIN_S)
    waited = time.monotonic() - started
    assert not publisher.is_alive(), f"the publish still waits after {waited:.1f} s"
    assert failed, "a publish on a dead link reported success"
    proxy.set(Fault.NONE)
    app.close()
