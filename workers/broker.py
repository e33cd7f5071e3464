"""Kombu's Redis transports with one repair: losing the broker must not kill the worker.

With late acks a worker holds unacked messages. When its broker connection drops, kombu
closes the channel and tries to put those messages back (or to ack one whose task just
ended) through the connection that is already gone; the AttributeError that follows
escapes as Celery's "Unrecoverable error" and the worker exits (kombu 5.7; the same shape
as celery/kombu#582). Letting those two steps fail loses nothing: the messages stay in
kombu's unacked hash in Redis, which kombu restores after the visibility timeout, and our
scheduler re-wakes their deliveries from the due set long before that.
"""

from __future__ import annotations

import logging
from typing import Any

from kombu.transport import redis as kombu_redis

log = logging.getLogger(__name__)


class _QoS(kombu_redis.QoS):
    def _connection_gone(self) -> bool:
        connection = self.channel.connection
        return connection is None or connection.client is None

    def restore_unacked(self, client: Any = None) -> Any:
        try:
            return super().restore_unacked(client)
        except AttributeError:
            if not self._connection_gone():
                raise  # not the lost-connection case: a real bug, let it surface
            held: dict[str, Any] = self._delivered or {}
            log.warning(
                "broker connection lost with %d unacked wake-ups; they stay in Redis and "
                "come back after the visibility timeout (the scheduler re-wakes them sooner)",
                len(held),
            )
            held.clear()
            return None

    def ack(self, delivery_tag: str) -> None:
        # A task that ends after the connection dropped acks through the same dead
        # connection; the message then comes back after the visibility timeout, and the
        # lease makes that second wake-up a no-op.
        try:
            super().ack(delivery_tag)
        except AttributeError:
            if not self._connection_gone():
                raise
            log.warning("ack lost with the broker connection; the wake-up will come back")


class _Channel(kombu_redis.Channel):
    QoS = _QoS


class _SentinelChannel(kombu_redis.SentinelChannel):
    QoS = _QoS


class RedisTransport(kombu_redis.Transport):
    Channel = _Channel


class SentinelTransport(kombu_redis.SentinelTransport):
    Channel = _SentinelChannel


def transport_for(broker_url: str) -> str:
    """The ``broker_transport`` setting for a kombu broker URL."""
    sentinel = broker_url.startswith("sentinel://")
    return f"{__name__}:{SentinelTransport.__name__ if sentinel else RedisTransport.__name__}"
