"""``sentinel://`` and ``redis+cluster://`` URLs: the spellings of a Redis that is not one
plain server, for every client.

``WEBHOOK_REDIS_URL=sentinel://[user:password@]host:26379,host2:26379/0?service_name=mymaster``
names the sentinels to ask, the database and the primary they watch; the credentials are
the primary's. redis-py has no URL form for Sentinel, and kombu wants one URL per sentinel
joined by ``;`` with the primary's name as a transport option, so both are derived here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

SCHEME = "sentinel"
DEFAULT_SENTINEL_PORT = 26379


@dataclass(frozen=True)
class SentinelUrl:
    sentinels: tuple[tuple[str, int], ...]
    service_name: str
    db: int = 0
    username: str | None = None
    password: str | None = None

    def primary_options(self) -> dict[str, Any]:
        """What redis-py needs, besides the address Sentinel gives, to talk to the primary."""
        return {"db": self.db, "username": self.username, "password": self.password}


def parse_sentinel(url: str) -> SentinelUrl | None:
    """The parts of a ``sentinel://`` URL; None for any other scheme (``redis://``...)."""
    parts = urlsplit(url)
    if parts.scheme != SCHEME:
        return None
    userinfo, _, hosts = parts.netloc.rpartition("@")
    username, _, password = userinfo.partition(":")
    query = parse_qs(parts.query)
    unknown = set(query) - {"service_name"}
    if unknown:
        raise ValueError(f"unknown sentinel URL parameters: {', '.join(sorted(unknown))}")
    names = query.get("service_name", [])
    if len(names) != 1 or not names[0]:
        raise ValueError("a sentinel URL needs exactly one ?service_name=<primary's name>")
    path = parts.path.strip("/")
    if not path.isdigit() and path:
        raise ValueError(f"the database in a sentinel URL must be a number, not {path!r}")
    return SentinelUrl(
        sentinels=tuple(_address(host) for host in hosts.split(",")),
        service_name=names[0],
        db=int(path or 0),
        username=unquote(username) or None,
        password=unquote(password) or None,
    )


def _address(
    text: str, default_port: int = DEFAULT_SENTINEL_PORT, kind: str = "sentinel"
) -> tuple[str, int]:
    if not text:
        raise ValueError(f"a {kind} URL has an empty host in its host list")
    if text.startswith("["):  # [v6]:port
        host, _, rest = text[1:].partition("]")
        port = rest.removeprefix(":")
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
    else:
        host, port = text, ""
    if port and not port.isdigit():
        raise ValueError(f"bad port in {kind} address {text!r}")
    return host, int(port or default_port)


# ``redis+cluster://[user:password@]h1:6379,h2:6379``: seed nodes of a Redis/Valkey Cluster
# (``rediss+cluster://`` over TLS). redis-py asks the seeds for the slot map and follows it;
# a cluster has no databases but 0, so a path other than "/" or "/0" is refused.
CLUSTER_SCHEMES = {"redis+cluster": False, "rediss+cluster": True}
DEFAULT_REDIS_PORT = 6379


@dataclass(frozen=True)
class ClusterUrl:
    nodes: tuple[tuple[str, int], ...]
    username: str | None = None
    password: str | None = None
    tls: bool = False

    def node_options(self) -> dict[str, Any]:
        """What redis-py's cluster clients need, besides the seeds, to talk to every node."""
        return {"username": self.username, "password": self.password, "ssl": self.tls}


def parse_cluster(url: str) -> ClusterUrl | None:
    """The parts of a ``redis+cluster://`` URL; None for any other scheme."""
    parts = urlsplit(url)
    if parts.scheme not in CLUSTER_SCHEMES:
        return None
    userinfo, _, hosts = parts.netloc.rpartition("@")
    username, _, password = userinfo.partition(":")
    if parts.query:
        raise ValueError("a cluster URL takes no parameters")
    if parts.path.strip("/") not in ("", "0"):
        raise ValueError("a cluster has only database 0: drop the path from the cluster URL")
    return ClusterUrl(
        nodes=tuple(_address(host, DEFAULT_REDIS_PORT, "cluster") for host in hosts.split(",")),
        username=unquote(username) or None,
        password=unquote(password) or None,
        tls=CLUSTER_SCHEMES[parts.scheme],
    )


def celery_broker(url: str) -> tuple[str, dict[str, Any]]:
    """kombu's broker URL for ours, and the transport options it needs besides (a Redis,
    plain or under Sentinel, or anything else kombu reads itself: amqp://...)."""
    if parse_cluster(url) is not None:
        # kombu's Redis transport speaks to one server (BRPOP over several lists, which a
        # cluster refuses across slots): a cluster store needs WEBHOOK_BROKER_URL.
        raise ValueError("a Redis Cluster cannot be the Celery broker: set WEBHOOK_BROKER_URL")
    sentinel = parse_sentinel(url)
    if sentinel is None:
        return url, {}
    auth = ""
    if sentinel.username or sentinel.password:
        user, password = (
            quote(part or "", safe="") for part in (sentinel.username, sentinel.password)
        )
        auth = f"{user}:{password}@"
    # No trailing ';': kombu would read an empty alternative as localhost.
    broker = ";".join(
        f"{SCHEME}://{auth}{_netloc(host, port)}/{sentinel.db}" for host, port in sentinel.sentinels
    )
    return broker, {"master_name": sentinel.service_name}


def _netloc(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
