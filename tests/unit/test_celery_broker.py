"""WEBHOOK_BROKER_URL (issue 20 item 2): the Celery broker apart from the store, a plain
Redis or Valkey, Sentinel or RabbitMQ; the store itself when unset, which a cluster store
cannot be. Nothing here connects anywhere."""

from __future__ import annotations

import kombu
import pytest
from pydantic import ValidationError

from webhook_service.config import Settings
from workers.celery_app import celery_config

CLUSTER = "redis+cluster://h1:7000,h2:7001"


def test_unset_the_broker_is_the_store() -> None:
    settings = Settings(redis_url="redis://store:6379/0")
    assert not settings.broker_apart
    config = celery_config(settings)
    assert config["broker_url"] == "redis://store:6379/0"
    assert config["broker_transport"] == "workers.broker:Transport"
    assert config["broker_transport_options"]["ack_emulation"] is False


def test_a_plain_broker_apart_gets_our_redis_transport_and_timeouts() -> None:
    settings = Settings(redis_url=CLUSTER, broker_url="redis://:pw@broker:6380/1")
    assert settings.broker_apart
    config = celery_config(settings)
    assert config["broker_url"] == "redis://:pw@broker:6380/1"
    assert config["broker_transport"] == "workers.broker:Transport"
    assert config["broker_transport_options"]["socket_timeout"] == settings.redis_socket_timeout


def test_a_sentinel_broker_apart_is_spelt_as_kombu_reads_it() -> None:
    settings = Settings(
        redis_url=CLUSTER, broker_url="sentinel://s1:26379,s2:26380/0?service_name=broker"
    )
    config = celery_config(settings)
    assert config["broker_url"] == "sentinel://s1:26379/0;sentinel://s2:26380/0"
    assert config["broker_transport"] == "workers.broker:SentinelTransport"
    assert config["broker_transport_options"]["master_name"] == "broker"


def test_rabbitmq_is_left_to_kombus_amqp_transport() -> None:
    url = "amqp://guest:guest@rabbit:5672/whs"
    config = celery_config(Settings(redis_url=CLUSTER, broker_url=url))
    assert config["broker_url"] == url
    # None: kombu picks the transport from the URL's scheme; the Redis options are not its.
    assert config["broker_transport"] is None
    assert config["broker_transport_options"] == {}
    connection = kombu.Connection(config["broker_url"])
    assert connection.transport_cls == "amqp"
    assert (connection.hostname, connection.virtual_host) == ("rabbit", "whs")


def test_a_cluster_store_without_a_broker_is_refused_at_start_up() -> None:
    with pytest.raises(ValidationError, match="WEBHOOK_BROKER_URL"):
        Settings(redis_url=CLUSTER)
