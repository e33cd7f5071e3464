"""sentinel:// URLs: parsed once, handed to redis-py as a Sentinel-backed client and to
kombu in its own spelling. Nothing here connects anywhere."""

from __future__ import annotations

import kombu
import pytest
import redis.asyncio.sentinel
import redis.sentinel

from webhook_service.config import Settings
from webhook_service.store.connect import async_client, sync_client
from webhook_service.store.redis_url import SentinelUrl, celery_broker, parse_sentinel
from workers.celery_app import celery_config

URL = "sentinel://h1:26379,h2:26380,h3/2?service_name=mymaster"


def test_a_sentinel_url_names_sentinels_database_and_primary() -> None:
    assert parse_sentinel(URL) == SentinelUrl(
        sentinels=(("h1", 26379), ("h2", 26380), ("h3", 26379)), service_name="mymaster", db=2
    )


def test_credentials_are_the_primarys_and_are_unquoted() -> None:
    parsed = parse_sentinel("sentinel://app:p%40ss%3Aw@[::1]:5000,10.0.0.2/0?service_name=m")
    assert parsed is not None
    assert parsed.sentinels == (("::1", 5000), ("10.0.0.2", 26379))
    assert parsed.primary_options() == {"db": 0, "username": "app", "password": "p@ss:w"}


@pytest.mark.parametrize("url", ["redis://h:6379/0", "rediss://u:p@h/1", "unix:///tmp/r.sock"])
def test_other_schemes_are_not_sentinel(url: str) -> None:
    assert parse_sentinel(url) is None
    assert celery_broker(url) == (url, {})


@pytest.mark.parametrize(
    ("url", "complaint"),
    [
        ("sentinel://h1:26379/0", "service_name"),
        ("sentinel://h1/0?service_name=", "service_name"),
        ("sentinel://h1/0?service_name=a&service_name=b", "service_name"),
        ("sentinel://h1/0?service_name=m&master=x", "unknown"),
        ("sentinel://h1/db0?service_name=m", "number"),
        ("sentinel://h1:port/0?service_name=m", "bad port"),
        ("sentinel://h1,,h2/0?service_name=m", "empty host"),
    ],
)
def test_malformed_sentinel_urls_are_refused(url: str, complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        parse_sentinel(url)


def test_kombu_gets_one_url_per_sentinel_and_the_primarys_name() -> None:
    broker, options = celery_broker("sentinel://:s3cr%2Ft@h1:26379,[::1]:26380/3?service_name=m")
    assert broker == "sentinel://:s3cr%2Ft@h1:26379/3;sentinel://:s3cr%2Ft@[::1]:26380/3"
    assert options == {"master_name": "m"}
    connection = kombu.Connection(broker, transport_options=options)
    # kombu reads the alternatives, the database and the password the way we meant them.
    assert connection.alt == broker.split(";")
    assert connection.transport_cls == "sentinel"
    assert (connection.hostname, connection.port, connection.virtual_host) == ("h1", 26379, "3")
    assert connection.password == "s3cr/t"


def test_the_celery_broker_is_the_sentinel_one_with_its_options() -> None:
    config = celery_config(Settings(redis_url=URL))
    assert (
        config["broker_url"] == "sentinel://h1:26379/2;sentinel://h2:26380/2;sentinel://h3:26379/2"
    )
    assert config["broker_transport_options"]["master_name"] == "mymaster"
    assert config["broker_transport_options"]["ack_emulation"] is False


def test_store_clients_ask_the_sentinels_for_the_primary() -> None:
    sync = sync_client(URL)
    pool = sync.connection_pool
    assert isinstance(pool, redis.sentinel.SentinelConnectionPool)
    assert pool.service_name == "mymaster" and pool.is_master
    assert pool.connection_kwargs["db"] == 2
    # Fail fast and retry, on the primary as on the sentinels themselves.
    assert pool.connection_kwargs["socket_connect_timeout"] == 2.0
    assert pool.connection_kwargs["retry"] is not None
    sentinels = pool.sentinel_manager.sentinels
    ports = [s.connection_pool.connection_kwargs["port"] for s in sentinels]
    assert ports == [26379, 26380, 26379]
    assert sentinels[0].connection_pool.connection_kwargs["socket_timeout"] == 5.0

    asynchronous = async_client(URL)
    assert isinstance(asynchronous.connection_pool, redis.asyncio.sentinel.SentinelConnectionPool)
    assert asynchronous.connection_pool.service_name == "mymaster"
