"""Every Redis key the service uses, in one place: one prefix, one schema version.

The Lua scripts beside this file build their keys from the same templates: ``scripts.py``
hands them this table (``LUA_KEYS``) as a preamble, so a name is only ever spelled here.

Keys ready for a cluster (DESIGN.md, "Cluster-ready keys"): every key one atomic step (a
script, a MULTI/EXEC) touches carries one hash tag, so that no step crosses a Redis Cluster
slot. An application's keys carry its **bucket**'s tag, ``{b<n>}`` right after the prefix,
n = its id's mark modulo ``BUCKETS`` (ids.py); and what would be global (the due set, the
log outbox, the release set, the counters, the endpoint sequence map, the uid map, the
application list, the wake-up bookkeeping) is kept once per bucket under the same tags. A
script is handed one key of its bucket as KEYS[1] (a cluster client routes it by that key)
and builds every other key from the templates under that key's tag. Job keys share the tag
``{jobs}``, API keys ``{apikeys}``, the event-type catalog ``{types}``; what no atomic step
shares with another key (locks, heartbeats, the schema marker, dashboard sessions, a generic
limiter) has none.

Data model (all under ``PREFIX``; B is a bucket's tag ``{b<n>}:``, the bucket of the id in
the name, or, for a structure kept per bucket, of what it holds):

===========================  =====  ==================================================
key                          type   holds
===========================  =====  ==================================================
B endpoint:{ep}              hash   url, description, event_types (JSON), disabled,
                                    disabled_reason, disabled_at, headers (JSON, values
                                    sealed), rate_limit, operations, secrets (encrypted
                                    JSON), created, updated, failing_since, troubled,
                                    seq (its sequence number, which its delivery ids
                                    end with), app (its application, for good),
                                    channels ('' = none, else a JSON list: sorted, at
                                    most 10), retry_schedule ('' = the global one, else
                                    a JSON list of delays), timeout ('' = the global
                                    request timeout, else seconds), filter ('' = none,
                                    else its payload filter's JSON: filters.py),
                                    ordering ('fifo', or '' = none: lua/common.lua
                                    pending_in), send_tp ('1': each attempt carries a
                                    traceparent header, tracing.py; else '')
B endpoints                  zset   every endpoint id of the bucket's applications
                                    (score 0, ordered by id = time): operator views
B endpoints:seq              str    the last endpoint sequence number given in the
                                    bucket (INCR): unique within it, as a delivery id
                                    (its event's body, then the tail) is
B endpoints:seqs             hash   delivery id tail -> endpoint id, for every endpoint
                                    of the bucket, deleted ones too: its sequence
                                    number (ids.seq_tail), and the id body the
                                    deliveries of one made before those end with
                                    (schema 2 wrote them; migrate mapped them)
B app:{app}                  hash   an application (store/applications.py): name, uid
                                    ('' = none), metadata (JSON object, '' = {}),
                                    rate_limit (events/s, '' = none), created, updated,
                                    portal (JSON: origins, name, logo_url, accent, only
                                    those set; no field when none is), filter_v (bumped
                                    with every change of one of its endpoints' filters;
                                    none until the first: api/endpoint_filters.py)
B app:{app}:endpoints        zset   the application's endpoint ids (score 0); its ZCARD
                                    is what WEBHOOK_MAX_ENDPOINTS_PER_APP limits
B apps                       zset   the bucket's application ids (score 0, ordered by
                                    id = time); a listing merges the buckets
B apps:uid                   hash   uid -> application id, in the bucket of the uid
                                    (``uid_bucket``): a uid names one application. An
                                    application created with a uid is made in that
                                    bucket; one whose uid changes later may be in
                                    another (store/applications.py says how the two
                                    are kept together)
B sub:type:{app}:{type}      set    the application's endpoints subscribed to one type
B sub:all:{app}              set    the application's endpoints that take every type
B sub:ops                    set    operations endpoints (of the default application,
                                    which the API enforces, so only its bucket's holds
                                    any): they get our operational events
B inflight:{ep}              zset   deliveries being sent to one endpoint, by lease
                                    expiry
B parked:{ep}                zset   deliveries waiting for one of those slots to free
B inflight:app:{app}         zset   deliveries of the application's events being sent,
                                    by lease expiry; WEBHOOK_APP_CONCURRENCY caps its
                                    size (none for the default application, nor our
                                    operational events, which belong to none:
                                    lua/common.lua capped_app)
B parked:app:{app}           zset   the application's deliveries waiting for one of
                                    those slots, by when they began to wait
B rate:{ep}                  str    the endpoint's rate limiter state (GCRA arrival)
B backlog:{ep}               str    how many of the endpoint's deliveries are pending
B fifo:{ep}                  list   a FIFO endpoint's pending deliveries in the order
                                    they became pending; only the head is due
B event:{msg}                hash   type, created (ms) (**), body (the exact bytes we
                                    sign), key (producer key id), app (its
                                    application; '' for our operational events, which
                                    belong to none), dlvs (delivery ids, comma list;
                                    one starting with the event's body as its tail
                                    only, ids.event_deliveries), live (how many of them
                                    Redis still holds: the event leaves with the last,
                                    release.lua), expunged (ms the body was deleted,
                                    then no body), ch (its channels, JSON list; only
                                    when it has some: a replay fans out by them again),
                                    example ('1': sent to one endpoint as an example;
                                    no field otherwise), at (its deliver_at, ms; only
                                    when it was given), tp (the W3C traceparent its
                                    attempts' spans link to, tracing.py; only when
                                    there is one)
B delivery:{dlv}             hash   event (**), endpoint (**), type (**), status,
                                    attempts, budget, next_at, created (**), updated,
                                    code, error, lease, lease_until, class (of the last
                                    attempt: 2xx..5xx, timeout, network), sched (ms:
                                    the deliver_at it was made for, when that was
                                    ahead; shown scheduled while next_at is that
                                    and no attempt was made, store/states.py), fifo
                                    ('1' while it is in its endpoint's FIFO line). Only
                                    while it is in flight, and WEBHOOK_HOT_SECONDS after it
                                    finished (then the log alone holds it, with its
                                    attempts). Nothing dead is kept: code and error only
                                    when not empty, lease and lease_until only while
                                    leased, next_at and budget only until it finishes
B metrics                    hash   counters and histogram buckets, see
                                    store/telemetry.py, which sums the buckets'
B stats:ep:{ep}              hash   last_success, last_failure (ms), last_failure_code,
                                    last_failure_error
B stats:ep:{ep}:m:{minute}   hash   one endpoint's attempts in one minute: a
                                    (attempts), s (2xx), ds / df (deliveries succeeded /
                                    failed), d{b} (duration histogram); expires after
                                    2 h. These, stats:ep:{ep} and the attempt fields of
                                    metrics are added by the delivering processes
                                    (store/counts.py)
B stats:ep:{ep}:h:{hour}     hash   the same per hour; expires after 26 h
B due                        zset   the bucket's delivery ids scored by the ms each
                                    next needs a worker (the scheduler claims from
                                    every bucket)
B wakeup:{queue}             hash   the newest wake-up of the bucket's deliveries the
                                    ingest script queued there: task (its id), count
                                    (its ids); lets the next event of the bucket join
                                    it while it waits (lua/common.lua push_wakeups)
B wakeup:more:{task}         list   the ids that joined that wake-up while it waited;
                                    the lease that takes the wake-up takes them
                                    (expires after a day, should the wake-up be lost:
                                    the due set has them). B: the bucket of the task's
                                    event (its id starts with it)
B idem:{app}:{key}:{idem}    hash   state, hash, event, until, fanout (the event's
                                    delivery count, for the replayed answer), one per
                                    application, API key and idempotency key; expires
                                    with the window
B limit:app:{app}            str    the application's ingest limiter (GCRA arrival)
B portal:gen:{app}           str    the application's portal generation (INCR; none =
                                    0): every grant and session of an older one is
                                    dead (DELETE .../portal-access bumps it)
B portal:grant:{app}:{hash}  hash   a portal link (store/portal.py): caps (comma
                                    list), expires (ms), gen; hash is the SHA-256 of
                                    its token, never the token; expires with it
B portal:session:{app}:{sid} str    the generation a portal session was opened in,
                                    while it lasts: sign-out deletes it; expires with
                                    its grant
B log:outbox                 stream the bucket's delivery log records not yet in SQL,
                                    in the order its state changes made them
                                    (webhook_service/history/records.py): the shipper
                                    writes every bucket's to SQL, then trims them
B log:release                zset   the bucket's finished deliveries (and events that
                                    fanned out to no one) whose log records are
                                    committed, scored by the ms they may leave Redis
                                    (WEBHOOK_HOT_SECONDS on): release.lua
B ops:requests               list   operational events a step of this bucket asked for
                                    (JSON: id, type, data, ...), which belong in the
                                    default application's bucket: the shipper's pass
                                    makes them there (lua/ops_emit.lua), then drops
                                    the request (store/ops.py)
B ops:made:{msg}             str    in the default application's bucket: that
                                    operational event was made (expires after a day):
                                    a request made twice makes it once
{jobs}:job:{job}             hash   a bulk retry or recovery: kind, filter, statuses,
                                    cursor, matched, retried, state, created, updated
{jobs}:job:{job}:owner       str    the API process working on the job, expiring
{jobs}:jobs:running          set    jobs not yet done
{apikeys}:apikey:{id}        hash   name, scopes (comma list), rate_limit, created,
                                    digest (HMAC-SHA256 of the key under the pepper;
                                    never the key)
{apikeys}:apikeys            zset   every API key id (score 0, ordered by id = time)
apikeys:pepper               str    the HMAC pepper, sealed with the master key
{types}:type:{name}          hash   an event type of the catalog (store/event_types.py):
                                    description, schema (JSON, '' = none), examples
                                    (JSON list), group ('' = none), deprecated,
                                    archived ('1' / '0'), created, updated
{types}:types                zset   every catalog type's name (score 0, by name)
{types}:types:version        str    bumped (INCR) by every catalog write: an API
                                    process reloads its compiled schemas when it moved
heartbeats                   zset   Celery worker hostname by the ms of its last beat
schedulers                   zset   every live scheduler's id (pid@host/random) by the
                                    ms of its last pass: those within a lease share
                                    the buckets (store/bucket_leases.py)
scheduler:passes             hash   bucket -> the ms its scheduler last passed over it
                                    (/readyz and the scheduler lag read the oldest)
schema                       str    the store's schema version, an integer
                                    (store/schema.py; none on a store written before
                                    it: schema 1)
buckets:epoch                str    ms: when `webhook-service migrate` put a store from
                                    before buckets into bucket 0 (ids older read as
                                    mark 0, ids.py); none on a store born with them
lease:bucket:{n}             str    the id of the scheduler that works on bucket n
                                    (its due claims, outbox, releases, ops requests),
                                    while the lease lasts (PX; renewed each pass)
lock:log-upkeep              str    the id of the scheduler that keeps the log's
                                    partitions and retention (work of no bucket)
lock:tick                    str    the token of the POST /v1/cron/tick run in progress
limit:{name}                 str    a generic rate limiter's state (GCRA arrival time),
                                    e.g. limit:apikey:{id} for a key's ingest limit
dashboard:session:{sid}      str    "1" while a dashboard sign-in lasts: its cookie
                                    names it, sign-out deletes it, it expires after
                                    DASHBOARD_SESSION_TTL (dashboard/session.py)
durability:mark              chan   pub/sub, nothing stored: strict mode publishes to
                                    it to move its connection's replication offset
                                    (api/events.py)
===========================  =====  ==================================================

(**) Derived fields: a hash leaves out what its id says, and readers take it from there
(common.lua delivery_event / delivery_endpoint / delivery_created, record.lua's etype,
DeliveryRecord.from_hash and DeliveryStore._read, EventStore.get). ``created`` is written
only when it differs from the time in the id (ids.id_time_ms), which it never does for ids
made with the same clock reading. A delivery's ``endpoint`` is named by its id's tail
(ids.delivery_tail), which its bucket's endpoints:seqs maps to the endpoint. A delivery
whose id starts with its event's body (every one but a replay's: ids.delivery_event) has
neither ``event`` nor ``type``: its type is its event's, read in the same round trip (an
event outlives its deliveries, see lua/release.lua). A replay's delivery keeps both. Data
written before these rules has every field, and reads the same.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import StrEnum

from webhook_service.ids import mark_of, uid_mark

PREFIX = "whs:1:"

# Celery queues: fresh deliveries and retries apart, so a backlog of retries never delays
# a first attempt.
QUEUE_FRESH = "whs.deliveries"
QUEUE_RETRY = "whs.retries"

# How many buckets the keys are kept in, for good: a key's bucket is its id's mark (0..1023,
# ids.py) modulo this. The trade: buckets spread over a cluster's primaries (64 over 3 or 6
# of them is within a few percent of even, and an application is never split), while every
# pass of the scheduler and the shipper polls each bucket's due set, outbox and release
# set, which costs an idle store about 1 % of one core (docs/scaling.md, "Buckets"). The
# mark has room for 1024: going there later splits each bucket by the mark's higher bits,
# keeping every application whole.
BUCKETS = 64
# The default application's bucket, and where migrate put a store from before buckets.
DEFAULT_BUCKET = 0
# applications.DEFAULT_APP_UID (applications.py imports this module): the default
# application's uid maps in its own bucket, whatever the uid's hash says.
_DEFAULT_UID = "default"


def bucket_of(identifier: str) -> int:
    """The bucket of an id's keys: its mark's (an application's ids carry its mark)."""
    return mark_of(identifier) % BUCKETS


def uid_bucket(uid: str) -> int:
    """Where a uid's mapping (apps:uid) is kept."""
    return DEFAULT_BUCKET if uid == _DEFAULT_UID else uid_mark(uid) % BUCKETS


def tag(bucket: int) -> str:
    if not 0 <= bucket < BUCKETS:
        raise ValueError(f"a bucket is 0..{BUCKETS - 1}, not {bucket}")
    return f"{{b{bucket}}}"


def head(bucket: int) -> str:
    """What every key of the bucket starts with: the prefix and the bucket's hash tag."""
    if not 0 <= bucket < BUCKETS:
        tag(bucket)  # refuses it
    return _HEADS[bucket]


# Made once: a delivery's path names a dozen keys.
_HEADS = tuple(f"{PREFIX}{tag(bucket)}:" for bucket in range(BUCKETS))


def slot_guard(key: str) -> str | None:
    """A key of ``key``'s hash tag that is never written, or None for a key of no tag: each
    script call on a cluster names it (store/scripts.py), so that a call while the slot
    moves is refused TRYAGAIN before it runs."""
    found = tag_of(key)
    return None if found is None else f"{PREFIX}{{{found}}}:slot-guard"


# The hash tag of a key of ours, if it has one: "b7", "jobs", "apikeys".
_TAG = re.compile(re.escape(PREFIX) + r"\{([^}]+)\}:")


def tag_of(key: str) -> str | None:
    found = _TAG.match(key)
    return found.group(1) if found else None


def bucket_of_key(key: str) -> int | None:
    """The bucket a key of ours is kept in; None for one outside every bucket."""
    found = tag_of(key)
    return int(found[1:]) if found and found[0] == "b" and found[1:].isdigit() else None


def all_buckets() -> range:
    return range(BUCKETS)


HEARTBEATS = PREFIX + "heartbeats"
# The schedulers' sharing of the buckets (store/bucket_leases.py). No hash tag on any: each
# is touched alone (a command of its own, or a script of that one key), so on a cluster the
# leases spread over the primaries by their names, and none is of a bucket's slot.
SCHEDULERS = PREFIX + "schedulers"
SCHEDULER_PASSES = PREFIX + "scheduler:passes"
LOG_UPKEEP_LOCK = PREFIX + "lock:log-upkeep"
TICK_LOCK = PREFIX + "lock:tick"


def bucket_lease(bucket: int) -> str:
    """The lease of the scheduler that works on ``bucket`` (no hash tag: see SCHEDULERS)."""
    tag(bucket)  # refuses a bucket out of range
    return f"{PREFIX}lease:bucket:{bucket}"


JOBS_TAG = "{jobs}"
JOBS_RUNNING = f"{PREFIX}{JOBS_TAG}:jobs:running"
API_KEYS_TAG = "{apikeys}"
API_KEYS = f"{PREFIX}{API_KEYS_TAG}:apikeys"
API_KEY_PEPPER = PREFIX + "apikeys:pepper"
# What strict mode writes before it waits (store/durability.py): outside a cluster a channel
# it publishes to; on a cluster a key of each bucket, an empty string its only value.
DURABILITY_MARK = PREFIX + "durability:mark"


def durability_mark(bucket: int) -> str:
    return head(bucket) + "durability:mark"


SCHEMA = PREFIX + "schema"
BUCKET_EPOCH = PREFIX + "buckets:epoch"

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


# The templates of every bucket's keys, after its head (``head``): the Lua scripts append an
# id to most; the others name a structure kept once per bucket. A script's K.<name> is
# head(its bucket) + LUA_KEYS[name].
LUA_KEYS = {
    "endpoint": "endpoint:",
    "endpoints": "endpoints",
    "endpoint_seq": "endpoints:seq",
    "endpoint_seqs": "endpoints:seqs",
    "app": "app:",
    "app_endpoints_suffix": ":endpoints",
    "apps": "apps",
    "apps_uid": "apps:uid",
    "sub_type": "sub:type:",
    "sub_type_infix": ":",
    "sub_all": "sub:all:",
    "sub_ops": "sub:ops",
    "inflight": "inflight:",
    "parked": "parked:",
    "app_inflight": "inflight:app:",
    "app_parked": "parked:app:",
    "rate": "rate:",
    "backlog": "backlog:",
    "fifo": "fifo:",
    "event": "event:",
    "delivery": "delivery:",
    "minute_infix": ":m:",
    "hour_infix": ":h:",
    "metrics": "metrics",
    "ep_stats": "stats:ep:",
    "due": "due",
    "wakeup": "wakeup:",
    "wakeup_more": "wakeup:more:",
    "idem": "idem:",
    "app_limit": "limit:app:",
    # Not used by any script: the portal's keys (store/portal.py) are of the
    # application's bucket like these, and the deletion job sweeps them by this name.
    "app_portal_gen": "portal:gen:",
    "app_portal_grant": "portal:grant:",
    "app_portal_session": "portal:session:",
    "outbox": "log:outbox",
    "release": "log:release",
    "ops_requests": "ops:requests",
    "ops_made": "ops:made:",
}
# Templates that are parts of a name rather than its start.
LUA_PARTS = frozenset({"app_endpoints_suffix", "sub_type_infix", "minute_infix", "hour_infix"})


def in_bucket(bucket: int, name: str, rest: str = "") -> str:
    """The key K.<name> .. rest of a script running in ``bucket``."""
    return head(bucket) + LUA_KEYS[name] + rest


def _of(name: str, identifier: str) -> str:
    return in_bucket(bucket_of(identifier), name, identifier)


def endpoint(endpoint_id: str) -> str:
    return _of("endpoint", endpoint_id)


def event(event_id: str) -> str:
    return _of("event", event_id)


def delivery(delivery_id: str) -> str:
    return _of("delivery", delivery_id)


def app(app_id: str) -> str:
    return _of("app", app_id)


def app_endpoints(app_id: str) -> str:
    return app(app_id) + LUA_KEYS["app_endpoints_suffix"]


def sub_type(app_id: str, event_type: str) -> str:
    return f"{_of('sub_type', app_id)}{LUA_KEYS['sub_type_infix']}{event_type}"


def sub_all(app_id: str) -> str:
    return _of("sub_all", app_id)


def portal_generation(app_id: str) -> str:
    return _of("app_portal_gen", app_id)


def portal_grant(app_id: str, token_digest: str) -> str:
    return _of("app_portal_grant", app_id) + ":" + token_digest


def portal_session(app_id: str, session_id: str) -> str:
    return _of("app_portal_session", app_id) + ":" + session_id


def app_limit(app_id: str) -> str:
    return _of("app_limit", app_id)


def app_inflight(app_id: str) -> str:
    return _of("app_inflight", app_id)


def app_parked(app_id: str) -> str:
    return _of("app_parked", app_id)


def inflight(endpoint_id: str) -> str:
    return _of("inflight", endpoint_id)


def parked(endpoint_id: str) -> str:
    return _of("parked", endpoint_id)


def rate(endpoint_id: str) -> str:
    return _of("rate", endpoint_id)


def backlog(endpoint_id: str) -> str:
    return _of("backlog", endpoint_id)


def fifo(endpoint_id: str) -> str:
    return _of("fifo", endpoint_id)


def endpoint_stats(endpoint_id: str) -> str:
    return _of("ep_stats", endpoint_id)


def endpoint_minute(endpoint_id: str, minute: int) -> str:
    return f"{endpoint_stats(endpoint_id)}{LUA_KEYS['minute_infix']}{minute}"


def endpoint_hour(endpoint_id: str, hour: int) -> str:
    return f"{endpoint_stats(endpoint_id)}{LUA_KEYS['hour_infix']}{hour}"


def idempotency(app_id: str, key_id: str, idempotency_key: str) -> str:
    return f"{_of('idem', app_id)}:{key_id}:{idempotency_key}"


def ops_made(event_id: str) -> str:
    return _of("ops_made", event_id)


def wakeup_more(task_id: str) -> str:
    """A wake-up's side list: its task id starts with the id of the event that queued it."""
    return _of("wakeup_more", task_id)


# The structures kept once per bucket.
def endpoints(bucket: int) -> str:
    return in_bucket(bucket, "endpoints")


def endpoint_seq(bucket: int) -> str:
    return in_bucket(bucket, "endpoint_seq")


def endpoint_seqs(bucket: int) -> str:
    return in_bucket(bucket, "endpoint_seqs")


def apps(bucket: int) -> str:
    return in_bucket(bucket, "apps")


def apps_uid(uid: str) -> str:
    """The uid map holding ``uid`` (in the uid's bucket)."""
    return in_bucket(uid_bucket(uid), "apps_uid")


def sub_ops(bucket: int = DEFAULT_BUCKET) -> str:
    return in_bucket(bucket, "sub_ops")


def due(bucket: int) -> str:
    return in_bucket(bucket, "due")


def metrics(bucket: int) -> str:
    return in_bucket(bucket, "metrics")


def outbox(bucket: int) -> str:
    return in_bucket(bucket, "outbox")


def release(bucket: int) -> str:
    return in_bucket(bucket, "release")


def wakeup(bucket: int, queue: str) -> str:
    return in_bucket(bucket, "wakeup", queue)


def ops_requests(bucket: int) -> str:
    return in_bucket(bucket, "ops_requests")


def by_bucket(ids: Iterable[str]) -> dict[int, list[str]]:
    """Ids grouped by bucket, each group in the order given: one script call a group."""
    groups: dict[int, list[str]] = {}
    for identifier in ids:
        groups.setdefault(bucket_of(identifier), []).append(identifier)
    return groups


# Lifetimes in seconds (the Lua preamble's TTL table): an endpoint's per-minute and
# per-hour windows, a little past the 60 minutes and 24 hours its stats show; the ids that
# joined a wake-up, should the wake-up be lost; an operational event's mark that it was
# made (its request is dropped within a pass of the shipper).
WINDOW_TTL = {
    "minute": 2 * 3600,
    "hour": 26 * 3600,
    "wakeup_more": 24 * 3600,
    "ops_made": 24 * 3600,
}


def api_key(key_id: str) -> str:
    return f"{PREFIX}{API_KEYS_TAG}:apikey:{key_id}"


# The event-type catalog: global (not per application), small and read often; one tag of
# its own, so a write's MULTI/EXEC is one slot.
EVENT_TYPES_TAG = "{types}"
EVENT_TYPES = f"{PREFIX}{EVENT_TYPES_TAG}:types"
EVENT_TYPES_VERSION = f"{PREFIX}{EVENT_TYPES_TAG}:types:version"


def event_type(name: str) -> str:
    return f"{PREFIX}{EVENT_TYPES_TAG}:type:{name}"


# A dashboard sign-in lasts 8 hours at most, however busy: a working day.
DASHBOARD_SESSION_TTL = 8 * 3600


def dashboard_session(session_id: str) -> str:
    return PREFIX + "dashboard:session:" + session_id


def limit(name: str) -> str:
    """A generic limiter (lua/ratelimit.lua), one key of its own."""
    return PREFIX + "limit:" + name


def job(job_id: str) -> str:
    return f"{PREFIX}{JOBS_TAG}:job:{job_id}"


def job_owner(job_id: str) -> str:
    return job(job_id) + ":owner"


# Before schema 5 no key had a hash tag: every name was PREFIX + what follows the tag now
# (``untagged``). `webhook-service migrate` renames them (store/bucket_migration.py) before
# the older steps run, each into bucket 0, where every id made before the bucket epoch is
# read (ids.py), or to {jobs} / {apikeys}; the uid map is split by uid. These names were
# global then; the older steps (below) read their bucket 0 copies.
LEGACY_ENDPOINTS = PREFIX + "endpoints"  # schema.py: an unmarked store holding endpoints
_LEGACY_KEPT = (
    "apikeys:pepper", "heartbeats", "scheduler", "schema", "buckets:epoch", "lock:",
    "lease:", "dashboard:session:",
)  # fmt: skip
_LEGACY_JOBS = ("job:", "jobs:running")
LEGACY_APPS_UID = PREFIX + "apps:uid"


def untagged(key: str) -> str:
    """The name a key of ours had before schema 5 (tests write stores of that layout)."""
    found = _TAG.match(key)
    return key if found is None else PREFIX + key[found.end() :]


def tagged(legacy: str) -> str | None:
    """The name a key of schema 4's layout takes in schema 5's; None for one that keeps its
    name (or is named schema 5's way already) and for the uid map, which is split."""
    if not legacy.startswith(PREFIX) or legacy.startswith(PREFIX + "{"):
        return None
    rest = legacy[len(PREFIX) :]
    if rest == "apps:uid" or rest.startswith(_LEGACY_KEPT):
        return None
    if rest.startswith("limit:") and not rest.startswith(LUA_KEYS["app_limit"]):
        return None  # a generic limiter: one key of its own
    if rest.startswith(_LEGACY_JOBS):
        return f"{PREFIX}{JOBS_TAG}:{rest}"
    if rest == "apikeys" or rest.startswith("apikey:"):
        return f"{PREFIX}{API_KEYS_TAG}:{rest}"
    return head(DEFAULT_BUCKET) + rest


# Schema 2 kept the history in Redis too: every event and delivery until retention trimmed
# them, indexed by idx:events, idx:dlv and the idx:dlv:… / idx:events:… zsets, each attempt
# in its delivery's hash (field a{n}) or, when long, in the list delivery:{dlv}:attempts,
# and the trim's retention:cursor. `webhook-service migrate` (history/backfill.py) moves it
# into the log and deletes it; these names (in bucket 0, where migrate renamed them first)
# are for it alone.
SCHEMA2_EVENTS = head(DEFAULT_BUCKET) + "idx:events"  # every event id (ordered by id = time)
SCHEMA2_INDEXES = head(DEFAULT_BUCKET) + "idx:*"  # a SCAN pattern: every history index
SCHEMA2_RETENTION_CURSOR = head(DEFAULT_BUCKET) + "retention:cursor"
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
# log outbox's records not yet shipped into a copy first, which then takes its place. All
# in bucket 0 by then, where the older steps run.
SCHEMA3_SUB_ALL = head(DEFAULT_BUCKET) + "sub:all"
SCHEMA3_OUTBOX_COPY = outbox(DEFAULT_BUCKET) + ":migrating"


def schema3_sub_type(event_type: str) -> str:
    return in_bucket(DEFAULT_BUCKET, "sub_type", event_type)


def idempotency_records(bucket: int = DEFAULT_BUCKET) -> str:
    """A SCAN pattern: every idempotency record of a bucket, of schema 3's layout or of
    today's."""
    return in_bucket(bucket, "idem", "*")


def idempotency_key_of(record: str, key_id: str) -> str | None:
    """The idempotency key as its producer sent it, from the name of a record of schema 3's
    layout (idem:{key}:{idem}, in bucket 0) made for the API key ``key_id``; None if it is
    not one of that key's."""
    head_ = in_bucket(DEFAULT_BUCKET, "idem", f"{key_id}:")
    return record[len(head_) :] if record.startswith(head_) else None


def schema4_idempotency(record: str, app_id: str) -> str | None:
    """The name a record of schema 3's layout (in bucket 0) takes in the application
    ``app_id`` (one of bucket 0: every application of a store migrated that far is); None
    for one named today's way already. The segment after idem: tells them apart: an
    application id starts with app_, an API key id never does (key_..., admin)."""
    start = in_bucket(DEFAULT_BUCKET, "idem")
    rest = record[len(start) :]
    if not record.startswith(start) or rest.startswith("app_"):
        return None
    return f"{_of('idem', app_id)}:{rest}"
