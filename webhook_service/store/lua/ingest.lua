#!lua
-- Accept one event into its application: check that the application exists (or create it),
-- the idempotency key, the application's rate limit and the log's backlog, then write the
-- event, one delivery per endpoint of the application that takes its type and channels,
-- their due entries and log record, and the idempotency record, or nothing.
-- KEYS[1]: K.event .. <msg>, the event's key (store/events.py IngestArgs.keys): the
--   application's bucket, which every other key is of: K.app .. <app>, K.apps, K.apps_uid
--   (a new application's uid maps in its bucket), K.app_limit .. <app>,
--   K.idem .. <app>:<key id>:<idempotency key> (whole, in ARGV), K.outbox,
--   K.sub_type .. <app> .. K.sub_type_infix .. <type>, K.sub_all .. <app>,
--   K.endpoint .. <ep>, K.delivery .. <dlv>, K.backlog .. <ep>, K.fifo .. <ep>, K.due,
--   K.event .. <msg>,
--   K.metrics, K.wakeup .. <queue>, K.wakeup_more .. <task>; and, unless told not to, the
--   wake queue itself (a Celery list, named in ARGV, of no bucket: on a cluster the broker
--   is apart and the caller wakes workers itself, so it passes '')
-- ARGV (store/events.py IngestArgs.argv gives them in this order):
local now = tonumber(ARGV[1])
local event_id = ARGV[2]
local etype = ARGV[3]
local body = ARGV[4]                  -- the exact bytes the deliveries send and sign
local key_id = ARGV[5]                -- the producer's API key id
local idem_key = ARGV[6]              -- its idempotency record (keys.idempotency); '' = none
local idem_hash = ARGV[7]             -- the body's fingerprint, which a repeat must match
local idem_ttl_s = ARGV[8]            -- how long the record lives
local idem_state = ARGV[9]            -- 'done' | 'in_flight' (the API answers only later)
local idem_until = ARGV[10]           -- ms until which 'in_flight' holds repeats off
local budget = tonumber(ARGV[11])     -- attempts each delivery gets
local grace_ms = tonumber(ARGV[12])   -- ms until a delivery's due entry wakes it anyway
local wake_queue = ARGV[13]           -- '' = the API wakes workers itself, if at all
local wake_template = ARGV[14]        -- the message, #TASK# and #IDS# to fill (wakeup.py)
local wake_batch = tonumber(ARGV[15]) -- ids per message at most
local idem_sent = ARGV[16]            -- the idempotency key as the producer sent it, for
                                      -- the log ('' = none)
local backlog_max = tonumber(ARGV[17])  -- outbox records past which a new event is refused:
                                        -- the log's database is behind, and Redis must not
                                        -- fill with what it has not taken
local app = ARGV[18]                  -- the event's application (an id)
local channels_json = ARGV[19]        -- the event's channels, a JSON list ('' = none)
local new_name = ARGV[20]             -- the application's name, to create it if it is
                                      -- missing ('' = don't)
local new_uid = ARGV[21]              -- and its uid ('' = none)
local only = ARGV[22]                 -- an example's one endpoint, of this application,
                                      -- whatever its types and channels ('' = fan out to
                                      -- every subscriber)
local filter_v = ARGV[23]             -- the application's filter version the API evaluated
                                      -- its endpoints' filters with ('' = none: an example)
local filtered_out = ARGV[24]         -- the filtered endpoints the event does not pass, a
                                      -- JSON list, left out of the fan-out ('' = none)
local deliver_at = tonumber(ARGV[25]) -- the event's deliver_at, ms ('' = none): its
                                      -- deliveries are due then, with no wake-up now,
                                      -- unless that is now or past (common.lua
                                      -- create_event)
local traceparent = ARGV[26]          -- a W3C traceparent (the API checked its form): the
                                      -- producer's, or the API's ingest span's; kept as
                                      -- the event's tp for every attempt's span to link
                                      -- to ('' = none)
-- Returns {'created', ids, pending ids}, {'replay', event id, type, created ms, fanout},
-- {'throttled', ms to wait} or {why}: 'no_app', 'no_endpoint' (`only` is no endpoint of the
-- application), 'mismatch', 'in_flight', 'backlog_full', 'stale' (`filter_v` is no longer
-- the application's) (store/events.py IngestOutcome).

local found = redis.call('HMGET', K.app .. app, 'name', 'rate_limit', 'filter_v')
local creating = not found[1]
-- A uid another application took since the API looked it up is not taken from it.
if creating and (new_name == '' or not uid_free(app, new_uid)) then return {'no_app'} end
if only ~= '' and redis.call('HGET', K.endpoint .. only, 'app') ~= app then
  return {'no_endpoint'}
end

if idem_key ~= '' then
  local rec = redis.call('HMGET', idem_key, 'hash', 'state', 'event', 'until', 'fanout')
  if rec[1] then
    if rec[1] ~= idem_hash then return {'mismatch'} end
    if rec[2] == 'in_flight' and tonumber(rec[4]) > now then return {'in_flight'} end
    -- The event may have left Redis for the log by now: the record holds the answer. Its
    -- type is this request's (the same body, by the fingerprint), its time the id's.
    return {'replay', rec[3], etype, id_time(rec[3]), tonumber(rec[5])}
  end
end

-- The filters the API evaluated must be the application's current ones: endpoint_save.lua
-- bumps filter_v with every change of one, and the API reads them again on 'stale'.
if filter_v ~= '' and (found[3] or '0') ~= filter_v then return {'stale'} end

-- A new application has no limit yet; a replay above is never throttled.
local rate = tonumber(found[2] or '') or 0
if rate > 0 then
  local wait = gcra(K.app_limit .. app, now, rate, math.max(1, math.floor(rate)))
  if wait > 0 then return {'throttled', wait} end
end

-- Only here, before anything is written: a replay above stores nothing, and the record
-- and retry scripts are never refused, so delivery goes on while the log is behind.
if redis.call('XLEN', K.outbox) >= backlog_max then return {'backlog_full'} end

if creating then create_app(app, new_name, new_uid, '', '', now, now, true) end
local channels = {}
if channels_json ~= '' then channels = cjson.decode(channels_json) end
local targets = subscribers(app, etype)
if filtered_out ~= '' then
  local out, kept = {}, {}
  for _, ep in ipairs(cjson.decode(filtered_out)) do out[ep] = true end
  for _, ep in ipairs(targets) do
    if not out[ep] then kept[#kept + 1] = ep end
  end
  targets = kept
end
if only ~= '' then
  -- An example reaches its endpoint alone, which no channel filter may leave out.
  targets, channels = {only}, nil
end
local due_at = now + grace_ms
local ids, pending = create_event(now, {id = event_id, type = etype, body = body, key = key_id,
  idem = idem_sent, app = app, channels = channels, example = only ~= '', at = deliver_at},
  targets, budget, due_at)
-- Kept for a replay, which fans out by them again; most events have none and pay nothing.
if channels_json ~= '' then redis.call('HSET', K.event .. event_id, 'ch', channels_json) end
if traceparent ~= '' then redis.call('HSET', K.event .. event_id, 'tp', traceparent) end
redis.call('HINCRBY', K.metrics, 'events_accepted', 1)
if wake_queue ~= '' then
  push_wakeups(wake_queue, wake_template, wake_batch, event_id, pending)
end

if idem_key ~= '' then
  redis.call('HSET', idem_key, 'hash', idem_hash, 'state', idem_state, 'event', event_id,
    'until', idem_until, 'fanout', #ids)
  redis.call('EXPIRE', idem_key, idem_ttl_s)
end
return {'created', ids, pending}
