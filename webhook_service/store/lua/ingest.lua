#!lua
-- Accept one event: check its idempotency key, write the event, one delivery per matching
-- endpoint, their due entries and log record, and the idempotency record, or nothing.
-- ARGV: now_ms, event_id, type, body, key_id, idem_key ('' = none), idem_hash,
--       idem_ttl_s, idem_state ('done' | 'in_flight'), idem_until_ms, budget, grace_ms,
--       wake_queue ('' = the API wakes workers itself, if at all), wake_template, wake_batch,
--       idempotency key as the producer sent it ('' = none: for the log)
--       backlog_max (outbox records past which a new event is refused: the log's database
--       is behind, and Redis must not fill with what it has not taken)
local now = tonumber(ARGV[1])
local event_id, etype, body, key_id = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local idem_key = ARGV[6]

if idem_key ~= '' then
  local rec = redis.call('HMGET', idem_key, 'hash', 'state', 'event', 'until', 'fanout')
  if rec[1] then
    if rec[1] ~= ARGV[7] then return {'mismatch'} end
    if rec[2] == 'in_flight' and tonumber(rec[4]) > now then return {'in_flight'} end
    -- The event may have left Redis for the log by now: the record holds the answer. Its
    -- type is this request's (the same body, by the fingerprint), its time the id's.
    return {'replay', rec[3], etype, id_time(rec[3]), tonumber(rec[5])}
  end
end

-- Only here, before anything is written: a replay above stores nothing, and the record
-- and retry scripts are never refused, so delivery goes on while the log is behind.
if redis.call('XLEN', K.outbox) >= tonumber(ARGV[17]) then return {'backlog_full'} end

local budget, due_at = tonumber(ARGV[11]), now + tonumber(ARGV[12])
local endpoints = redis.call('SUNION', K.sub_type .. etype, K.sub_all)
local ids, pending = create_event(now, event_id, etype, body, key_id, ARGV[16], endpoints,
  budget, due_at)
redis.call('HINCRBY', K.metrics, 'events_accepted', 1)
if ARGV[13] ~= '' then
  push_wakeups(ARGV[13], ARGV[14], tonumber(ARGV[15]), event_id, pending)
end

if idem_key ~= '' then
  redis.call('HSET', idem_key, 'hash', ARGV[7], 'state', ARGV[9], 'event', event_id,
    'until', ARGV[10], 'fanout', #ids)
  redis.call('EXPIRE', idem_key, ARGV[8])
end
return {'created', ids, pending}
