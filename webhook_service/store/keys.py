"""Every Redis key the service uses, in one place: one prefix, one schema version.

The Lua scripts beside this file build per-id keys from the same templates: ``scripts.py``
hands them this table (``LUA_KEYS``) as a preamble, so a name is only ever spelled here.

Data model (all under ``PREFIX``):

=========================  =====  ====================================================
key                        type   holds
=========================  =====  ====================================================
endpoint:{ep}              hash   url, description, event_types (JSON), disabled,
                                  secrets (encrypted JSON), created, updated
endpoints                  zset   every endpoint id (score 0, ordered by id = time)
sub:type:{type}            set    enabled endpoints subscribed to one event type
sub:all                    set    enabled endpoints that take every type
event:{msg}                hash   type, created (ms), body (the exact bytes we sign),
                                  key (producer key id), dlvs (delivery ids, comma list)
delivery:{dlv}             hash   event, endpoint, type, status, attempts, budget,
                                  next_at, created, updated, code, error, lease, lease_until
delivery:{dlv}:attempts    list   one JSON object per attempt, in order
idx:events                 zset   every event id (score 0)
idx:dlv                    zset   every delivery id (score 0)
idx:dlv:ep:{ep}            zset   deliveries of one endpoint
idx:dlv:status:{status}    zset   deliveries in one status
idx:dlv:type:{type}        zset   deliveries of one event type
due                        zset   delivery id scored by the ms it next needs a worker
idem:{key}:{idempotency}   hash   state, hash, event, until; expires with the window
lock:scheduler             str    the token of the scheduler that may act
=========================  =====  ====================================================
"""

from __future__ import annotations

PREFIX = "whs:1:"

# Celery queues: fresh deliveries and retries apart, so a backlog of retries never delays
# a first attempt.
QUEUE_FRESH = "whs.deliveries"
QUEUE_RETRY = "whs.retries"

ENDPOINTS = PREFIX + "endpoints"
SUB_ALL = PREFIX + "sub:all"
EVENTS_INDEX = PREFIX + "idx:events"
DELIVERIES_INDEX = PREFIX + "idx:dlv"
DUE = PREFIX + "due"
SCHEDULER_LOCK = PREFIX + "lock:scheduler"

# Templates the Lua scripts append an id to.
LUA_KEYS = {
    "endpoint": PREFIX + "endpoint:",
    "endpoints": ENDPOINTS,
    "sub_type": PREFIX + "sub:type:",
    "sub_all": SUB_ALL,
    "event": PREFIX + "event:",
    "events_index": EVENTS_INDEX,
    "delivery": PREFIX + "delivery:",
    "attempts_suffix": ":attempts",
    "dlv_index": DELIVERIES_INDEX,
    "dlv_by_endpoint": PREFIX + "idx:dlv:ep:",
    "dlv_by_status": PREFIX + "idx:dlv:status:",
    "dlv_by_type": PREFIX + "idx:dlv:type:",
    "due": DUE,
    "idem": PREFIX + "idem:",
}


def endpoint(endpoint_id: str) -> str:
    return LUA_KEYS["endpoint"] + endpoint_id


def event(event_id: str) -> str:
    return LUA_KEYS["event"] + event_id


def delivery(delivery_id: str) -> str:
    return LUA_KEYS["delivery"] + delivery_id


def attempts(delivery_id: str) -> str:
    return delivery(delivery_id) + LUA_KEYS["attempts_suffix"]


def deliveries_by_endpoint(endpoint_id: str) -> str:
    return LUA_KEYS["dlv_by_endpoint"] + endpoint_id


def deliveries_by_status(status: str) -> str:
    return LUA_KEYS["dlv_by_status"] + status


def deliveries_by_type(event_type: str) -> str:
    return LUA_KEYS["dlv_by_type"] + event_type


def idempotency(key_id: str, idempotency_key: str) -> str:
    return f"{LUA_KEYS['idem']}{key_id}:{idempotency_key}"
