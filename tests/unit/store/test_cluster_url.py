"""redis+cluster:// URLs (issue 20 item 1): parsed once, handed to redis-py's cluster
clients with the same timeouts and retry as a plain client's, and refused as a broker.
Nothing here connects anywhere (the async cluster client connects on its first command)."""

from __future__ import annotations

import pytest
import redis.asyncio.cluster

from webhook_service.store.connect import async_client, is_cluster
from webhook_service.store.redis_url import ClusterUrl, celery_broker, parse_cluster, parse_sentinel

URL = "redis+cluster://:p%40ss@h1:7000,h2,[::1]:7002"


def test_a_cluster_url_names_its_seed_nodes_and_credentials() -> None:
    assert parse_cluster(URL) == ClusterUrl(
        nodes=(("h1", 7000), ("h2", 6379), ("::1", 7002)), password="p@ss"
    )
    assert parse_sentinel(URL) is None


def test_rediss_is_a_cluster_over_tls() -> None:
    parsed = parse_cluster("rediss+cluster://app:pw@h1:7000/0")
    assert parsed is not None
    assert parsed.node_options() == {"username": "app", "password": "pw", "ssl": True}


@pytest.mark.parametrize("url", ["redis://h:6379/0", "sentinel://h/0?service_name=m"])
def test_other_schemes_are_not_a_cluster(url: str) -> None:
    assert parse_cluster(url) is None


@pytest.mark.parametrize(
    ("url", "complaint"),
    [
        ("redis+cluster://h1:7000/3", "only database 0"),
        ("redis+cluster://h1:7000?read_from_replicas=1", "no parameters"),
        ("redis+cluster://h1:port", "bad port"),
        ("redis+cluster://h1,,h2", "empty host"),
    ],
)
def test_malformed_cluster_urls_are_refused(url: str, complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        parse_cluster(url)


def test_a_cluster_is_no_celery_broker() -> None:
    with pytest.raises(ValueError, match="WEBHOOK_BROKER_URL"):
        celery_broker(URL)


def test_the_async_client_is_a_cluster_one_with_our_timeouts_and_retry() -> None:
    client = async_client(URL)
    assert isinstance(client, redis.asyncio.cluster.RedisCluster)
    assert is_cluster(client)
    nodes = list(client.nodes_manager.startup_nodes.values())
    assert [(node.host, node.port) for node in nodes] == [("h1", 7000), ("h2", 6379), ("::1", 7002)]
    options = nodes[0].connection_kwargs
    assert options["socket_connect_timeout"] == 2.0
    assert options["socket_timeout"] == 5.0
    assert options["health_check_interval"] == 15.0
    assert options["password"] == "p@ss"
    assert client.retry.get_retries() == 2
