"""Every Redis key the service uses, in one place: one prefix, one schema version.

The Lua scripts beside this file build per-id keys from the same templates: ``scripts.py``
hands them this table (``LUA_KEYS``) as a preamble, so a name is only ever spelled here.

Data model (all under ``PREFIX``):

=========================  =====  ====================================================
key                        type   holds
=========================  =====  ====================================================
endpoint:{ep}              hash   url, description, event_types (JSON), disabled,
                                  disabled_reason, disabled_at, headers (JSON, values
                                  sealed), rate_limit, operations, secrets (encrypted
                                  JSON), created, updated, failing_since, troubled,
                                  seq (its sequence number, which its delivery ids end
                                  with), app (its application, for good), channels
                                  ('' = none, else a JSON list: sorted, at most 10)
endpoints                  zset   every endpoint id of every application (score 0,
                                  ordered by id = time): operator views, migrate
endpoints:seq              str    the last endpoint sequence number given (INCR)
endpoints:seqs             hash   delivery id tail -> endpoint id, for every endpoint,
                                  deleted ones too: its sequence number (ids.seq_tail),
                                  and the id body the deliveries of one made before those
                                  end with (schema 2 wrote them; migrate mapped them)
app:{app}                  hash   an application (store/applications.py): name, uid
                                  ('' = none), metadata (JSON object, '' = {}),
                                  rate_limit (events/s, '' = none), created, updated
app:{app}:endpoints        zset   the application's endpoint ids (score 0); its ZCARD is
                                  what WEBHOOK_MAX_ENDPOINTS_PER_APP limits
apps                       zset   every application id (score 0, ordered by id = time)
apps:uid                   hash   uid -> application id: a uid names one application
sub:type:{app}:{type}      set    the application's endpoints subscribed to one type
sub:all:{app}              set    the application's endpoints that take every type
sub:ops                    set    operations endpoints (of the default application, which
                                  the API enforces): they get our operational events
inflight:{ep}              zset   deliveries being sent to one endpoint, by lease expiry
parked:{ep}                zset   deliveries waiting for one of those slots to free
inflight:app:{app}         zset   deliveries of the application's events being sent, by
                                  lease expiry; WEBHOOK_APP_CONCURRENCY caps its size (none
                                  for the default application, nor our operational events,
                                  which belong to none: lua/common.lua capped_app)
parked:app:{app}           zset   the application's deliveries waiting for one of those
                                  slots, by when they began to wait
rate:{ep}                  str    the endpoint's rate limiter state (GCRA arrival time)
backlog:{ep}               str    how many of the endpoint's deliveries are pending
event:{msg}                hash   type, created (ms) (**), body (the exact bytes we sign),
                                  key (producer key id), app (its application; '' for
                                  our operational events, which belong to none), dlvs
                                  (delivery ids, comma list; one starting with the
                                  event's body as its tail only,
                                  ids.event_deliveries), live (how many of them Redis
                                  still holds: the event leaves with the last, release.lua),
                                  expunged (ms the body was deleted, then no body), ch
                                  (its channels, JSON list; only when it has some: a
                                  replay fans out by them again)
delivery:{dlv}             hash   event (**), endpoint (**), type (**), status, attempts,
                                  budget, next_at, created (**), updated, code, error,
                                  lease, lease_until,
                                  class (of the last attempt: 2xx..5xx, timeout, network).
                                  Only while it is in flight, and WEBHOOK_HOT_SECONDS
                                  after it finished (then the log alone holds it, with
                                  its attempts). Nothing dead is kept: code and error
                                  only when not empty, lease and lease_until only while
                                  leased, next_at and budget only until it is finished
metrics                    hash   cluster-wide counters and histogram buckets, see
                                  store/telemetry.py
stats:ep:{ep}              hash   last_success, last_failure (ms), last_failure_code,
                                  last_failure_error
stats:ep:{ep}:m:{minute}   hash   one endpoint's attempts in one minute: a (attempts),
                                  s (2xx), ds / df (deliveries succeeded / failed),
                                  d{b} (duration histogram); expires after 2 h. These,
                                  stats:ep:{ep} and the attempt fields of metrics are
                                  added by the delivering processes (store/counts.py)
stats:ep:{ep}:h:{hour}     hash   the same per hour; expires after 26 h
heartbeats                 zset   Celery worker hostname by the ms of its last heartbeat
scheduler:tick             str    the ms the acting scheduler last finished a pass
schema                     str    the store's schema version, an integer (store/schema.py;
                                  none on a store written before it: schema 1)
due                        zset   delivery id scored by the ms it next needs a worker
wakeup:{queue}             hash   the newest wake-up the ingest script queued there: task
                                  (its id), count (its ids); lets the next event join it
                                  while it waits (lua/common.lua push_wakeups)
wakeup:more:{task}         list   the ids that joined that wake-up while it waited; the
                                  lease that takes the wake-up takes them (expires after a
                                  day, should the wake-up be lost: the due set has them)
idem:{app}:{key}:{idem}    hash   state, hash, event, until, fanout (the event's delivery
                                  count, for the replayed answer), one per application,
                                  API key and idempotency key; expires with the window
lock:scheduler             str    the token of the scheduler that may act
lock:tick                  str    the token of the POST /v1/cron/tick run in progress
job:{job}                  hash   a bulk retry or recovery: kind, filter, statuses, cursor,
                                  matched, retried, state, created, updated
job:{job}:owner            str    the API process working on the job, expiring
jobs:running               set    jobs not yet done
log:outbox                 stream the delivery log's records not yet in SQL, in the order
                                  the state changes made them (webhook_service/history/
                                  records.py): the shipper writes them to SQL, then trims
lock:shipper               str    the token of the shipper that may ship the outbox
log:release                zset   finished deliveries (and events that fanned out to no
                                  one) whose log records are committed, scored by the ms
                                  they may leave Redis (WEBHOOK_HOT_SECONDS on): release.lua
limit:{name}               str    a generic rate limiter's state (GCRA arrival time), e.g.
                                  limit:apikey:{id} for a key's ingest limit, and
                                  limit:app:{app} for an application's (ingest.lua)
apikey:{id}                hash   name, scopes (comma list), rate_limit, created, digest
                                  (HMAC-SHA256 of the key under the pepper; never the key)
apikeys                    zset   every API key id (score 0, ordered by id = time)
apikeys:pepper             str    the HMAC pepper, sealed with the master key
dashboard:session:{sid}    str    "1" while a dashboard sign-in lasts: its cookie names it,
                                  sign-out deletes it, it expires after
                                  DASHBOARD_SESSION_TTL (dashboard/session.py)
durability:mark            chan   pub/sub, nothing stored: strict mode publishes to it to
                                  move its connection's replication offset (api/events.py)
=========================  =====  ====================================================

(**) Derived fields: a hash leaves out what its id says, and readers take it from there
(common.lua delivery_event / delivery_endpoint / delivery_created / delivery_type,
DeliveryRecord.from_hash and DeliveryStore._read, EventStore.get). ``created`` is written
only when it differs from the time in the id (ids.id_time_ms), which it never does for ids
made with the same clock reading. A delivery's ``endpoint`` is named by its id's tail
(ids.delivery_tail), which endpoints:seqs maps to the endpoint. A delivery whose id
starts with its event's body (every one but a replay's: ids.delivery_event) has neither
``event`` nor ``type``: its type is its event's, read in the same round trip (an event
outlives its deliveries, see lua/release.lua). A replay's delivery keeps both. Data
written before these rules has every field, and reads the same.
"""

from __future__ import annotations

import re
from enum import StrEnum

PREFIX = "whs:1:"

# Celery queues: fresh deliveries and retries apart, so a backlog of retries never delays
# a first attempt.
QUEUE_FRESH = "whs.deliveries"
QUEUE_RETRY = "whs.retries"

ENDPOINTS = PREFIX + "endpoints"
ENDPOINT_SEQ = PREFIX + "endpoints:seq"
ENDPOINT_SEQS = PREFIX + "endpoints:seqs"
APPS = PREFIX + "apps"
APPS_UID = PREFIX + "apps:uid"
SUB_OPS = PREFIX + "sub:ops"
DUE = PREFIX + "due"
METRICS = PREFIX + "metrics"
HEARTBEATS = PREFIX + "heartbeats"
SCHEDULER_TICK = PREFIX + "scheduler:tick"
SCHEDULER_LOCK = PREFIX + "lock:scheduler"
TICK_LOCK = PREFIX + "lock:tick"
JOBS_RUNNING = PREFIX + "jobs:running"
API_KEYS = PREFIX + "apikeys"
API_KEY_PEPPER = PREFIX + "apikeys:pepper"
DURABILITY_MARK = PREFIX + "durability:mark"
SCHEMA = PREFIX + "schema"
LOG_OUTBOX = PREFIX + "log:outbox"
LOG_RELEASE = PREFIX + "log:release"
SHIPPER_LOCK = PREFIX + "lock:shipper"

# The server keeps a hash compact (a listpack, about half the size of a table) while every
# value is at most hash-max-listpack-value bytes; one longer value turns the whole hash into
# a table. Valkey's default is 64, which an event's body or its delivery list soon passes.
# We recommend this value (docs/deploy.md), and set it on every server we start ourselves
# (embedded.py, docker-compose.yml). A server left at 64 works the same, only with bigger
# hashes.
HASH_MAX_LISTPACK_VALUE = 512


class OutboxField(StrEnum):
    """The fields of a log outbox entry (the Lua preamble's LOG table). Each entry has one
    kind field, holding the record as JSON, and may carry the bytes it is about beside it,
    unescaped: an event's body, an attempt's JSON as the worker wrote it."""

    EVENT = "e"  # an accepted event and its first deliveries
    REPLAY = "p"  # new deliveries of a stored event
    STATE = "s"  # a delivery's state after a change (with the attempt that made it, if any)
    EXPUNGE = "x"  # an event's payload deleted
    BODY = "b"
    ATTEMPT = "a"


# Templates the Lua scripts append an id to.
LUA_KEYS = {
    "endpoint": PREFIX + "endpoint:",
    "endpoints": ENDPOINTS,
    "endpoint_seq": ENDPOINT_SEQ,
    "endpoint_seqs": ENDPOINT_SEQS,
    "app": PREFIX + "app:",
    "app_endpoints_suffix": ":endpoints",
    "apps": APPS,
    "apps_uid": APPS_UID,
    "sub_type": PREFIX + "sub:type:",
    "sub_type_infix": ":",
    "sub_all": PREFIX + "sub:all:",
    "sub_ops": SUB_OPS,
    "inflight": PREFIX + "inflight:",
    "parked": PREFIX + "parked:",
    "app_inflight": PREFIX + "inflight:app:",
    "app_parked": PREFIX + "parked:app:",
    "rate": PREFIX + "rate:",
    "backlog": PREFIX + "backlog:",
    "event": PREFIX + "event:",
    "delivery": PREFIX + "delivery:",
    "minute_infix": ":m:",
    "hour_infix": ":h:",
    "metrics": METRICS,
    "ep_stats": PREFIX + "stats:ep:",
    "due": DUE,
    "wakeup": PREFIX + "wakeup:",
    "wakeup_more": PREFIX + "wakeup:more:",
    "idem": PREFIX + "idem:",
    "limit": PREFIX + "limit:",
    "app_limit": PREFIX + "limit:app:",
    "outbox": LOG_OUTBOX,
    "release": LOG_RELEASE,
}


def endpoint(endpoint_id: str) -> str:
    return LUA_KEYS["endpoint"] + endpoint_id


def event(event_id: str) -> str:
    return LUA_KEYS["event"] + event_id


def delivery(delivery_id: str) -> str:
    return LUA_KEYS["delivery"] + delivery_id


def app(app_id: str) -> str:
    return LUA_KEYS["app"] + app_id


def app_endpoints(app_id: str) -> str:
    return app(app_id) + LUA_KEYS["app_endpoints_suffix"]


def sub_type(app_id: str, event_type: str) -> str:
    return f"{LUA_KEYS['sub_type']}{app_id}{LUA_KEYS['sub_type_infix']}{event_type}"


def sub_all(app_id: str) -> str:
    return LUA_KEYS["sub_all"] + app_id


def app_limit(app_id: str) -> str:
    return LUA_KEYS["app_limit"] + app_id


def app_inflight(app_id: str) -> str:
    return LUA_KEYS["app_inflight"] + app_id


def app_parked(app_id: str) -> str:
    return LUA_KEYS["app_parked"] + app_id


def backlog(endpoint_id: str) -> str:
    return LUA_KEYS["backlog"] + endpoint_id


def endpoint_stats(endpoint_id: str) -> str:
    return LUA_KEYS["ep_stats"] + endpoint_id


def endpoint_minute(endpoint_id: str, minute: int) -> str:
    return f"{endpoint_stats(endpoint_id)}{LUA_KEYS['minute_infix']}{minute}"


def endpoint_hour(endpoint_id: str, hour: int) -> str:
    return f"{endpoint_stats(endpoint_id)}{LUA_KEYS['hour_infix']}{hour}"


# Lifetimes in seconds (the Lua preamble's TTL table): an endpoint's per-minute and
# per-hour windows, a little past the 60 minutes and 24 hours its stats show; the ids that
# joined a wake-up, should the wake-up be lost.
WINDOW_TTL = {"minute": 2 * 3600, "hour": 26 * 3600, "wakeup_more": 24 * 3600}


def idempotency(app_id: str, key_id: str, idempotency_key: str) -> str:
    return f"{LUA_KEYS['idem']}{app_id}:{key_id}:{idempotency_key}"


def api_key(key_id: str) -> str:
    return PREFIX + "apikey:" + key_id


# A dashboard sign-in lasts 8 hours at most, however busy: a working day.
DASHBOARD_SESSION_TTL = 8 * 3600


def dashboard_session(session_id: str) -> str:
    return PREFIX + "dashboard:session:" + session_id


def limit(name: str) -> str:
    return LUA_KEYS["limit"] + name


def job(job_id: str) -> str:
    return PREFIX + "job:" + job_id


def job_owner(job_id: str) -> str:
    return job(job_id) + ":owner"


# Schema 2 kept the history in Redis too: every event and delivery until retention trimmed
# them, indexed by idx:events, idx:dlv and the idx:dlv:… / idx:events:… zsets, each attempt
# in its delivery's hash (field a{n}) or, when long, in the list delivery:{dlv}:attempts,
# and the trim's retention:cursor. `webhook-service migrate` (history/backfill.py) moves it
# into the log and deletes it; these names are for it alone.
SCHEMA2_EVENTS = PREFIX + "idx:events"  # every event id (score 0, ordered by id = time)
SCHEMA2_INDEXES = PREFIX + "idx:*"  # a SCAN pattern: every history index
SCHEMA2_RETENTION_CURSOR = PREFIX + "retention:cursor"
_SCHEMA2_ATTEMPT_FIELD = re.compile(r"a[1-9][0-9]*")


def schema2_attempts(delivery_id: str) -> str:
    return delivery(delivery_id) + ":attempts"


def schema2_attempt_field(field: str) -> bool:
    """Whether a delivery hash field is one of schema 2's attempts (a{n})."""
    return _SCHEMA2_ATTEMPT_FIELD.fullmatch(field) is not None


# Schema 3 had one set of endpoints, no applications: subscriptions sub:type:{type} and
# sub:all, idempotency records idem:{key}:{idem}. Schema 2 named its records the same way,
# and history/backfill.py reads them there (its step runs before 3 -> 4). The 3 -> 4 step
# (store/tenancy_migration.py) moves them all into the default application; it rewrites the
# log outbox's records not yet shipped into a copy first, which then takes its place.
SCHEMA3_SUB_ALL = PREFIX + "sub:all"
SCHEMA3_OUTBOX_COPY = LOG_OUTBOX + ":migrating"


def schema3_sub_type(event_type: str) -> str:
    return LUA_KEYS["sub_type"] + event_type


def idempotency_records() -> str:
    """A SCAN pattern: every idempotency record, of schema 3's layout or of today's."""
    return LUA_KEYS["idem"] + "*"


def idempotency_key_of(record: str, key_id: str) -> str | None:
    """The idempotency key as its producer sent it, from the name of a record of schema 3's
    layout (idem:{key}:{idem}) made for the API key ``key_id``; None if it is not one of that
    key's."""
    head = f"{LUA_KEYS['idem']}{key_id}:"
    return record[len(head) :] if record.startswith(head) else None


def schema4_idempotency(record: str, app_id: str) -> str | None:
    """The name a record of schema 3's layout takes in the application ``app_id``; None for
    one named today's way already. The segment after idem: tells them apart: an application
    id starts with app_, an API key id never does (key_..., admin)."""
    rest = record[len(LUA_KEYS["idem"]) :]
    if not record.startswith(LUA_KEYS["idem"]) or rest.startswith("app_"):
        return None
    return f"{LUA_KEYS['idem']}{app_id}:{rest}"
