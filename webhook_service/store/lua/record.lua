#!lua flags=allow-oom
-- Record one attempt and the delivery's next state, only if we still hold the lease: an
-- attempt is recorded once, and a worker whose lease ran out cannot overwrite the one that
-- took over. Also frees the endpoint's in-flight slot and keeps the endpoint's health:
-- a success clears its failing streak; an exhausted delivery after `disable_after_ms` of
-- failing, or a 410, disables it. Health changes become operational events.
-- The attempt itself goes only to the log outbox (log_state): Redis keeps the delivery's
-- state, the log keeps its history.
-- Keys (none passed as KEYS): K.delivery .. <dlv>, K.endpoint_seqs, K.event .. <msg>,
--   K.endpoint .. <ep>, K.inflight .. <ep>, K.parked .. <ep>, K.rate .. <ep>,
--   K.backlog .. <ep>, K.due, K.metrics, K.outbox,
--   K.sub_ops (the endpoints an operational event goes to, under the same templates)
-- ARGV (store/deliveries.py RecordArgs.argv gives them in this order):
local now = tonumber(ARGV[1])
local token = ARGV[2]                 -- the lease this attempt was sent under
local id = ARGV[3]                    -- the delivery
local attempt_json = ARGV[4]          -- the attempt, as the log keeps it
local outcome = ARGV[5]               -- 'ok' | 'fail' | 'gone' (deliveries.py AttemptOutcome)
local delay = tonumber(ARGV[6])       -- ms to the next try; -1: no more tries
local code = ARGV[7]                  -- the status code ('' = none)
local err = ARGV[8]                   -- the error class ('' = none)
local disable_after = tonumber(ARGV[9])  -- ms of failing that disables the endpoint
local ctx = {now = now,               -- for the operational events it may cause:
  iso = ARGV[10],                     -- the time, ISO 8601
  budget = tonumber(ARGV[11]),        -- attempts their deliveries get
  ids = {ARGV[12], ARGV[13], ARGV[14]}}  -- their ids, one each
local next_token = ARGV[15]           -- lease the parked delivery with it ('' = don't)
local next_lease_ms = tonumber(ARGV[16])  -- that lease's lease_ms,
local next_max = tonumber(ARGV[17])       -- and its max_in_flight
local class = ARGV[18]                -- the answer's class (deliveries.py STATUS_CLASSES)
-- Returns {'stale'}, or {status, attempts, the delivery's creation ms[, the parked
-- delivery's common.lua lease_one row]} (store/deliveries.py Recorded.parse). What the
-- attempt adds to the metrics and the endpoint's windows the caller counts (store/counts.py).

local key = K.delivery .. id
local d = redis.call('HMGET', key, 'lease', 'status', 'attempts', 'budget', 'endpoint', 'type',
  'event', 'created')
if d[1] ~= token or d[2] ~= 'pending' then return {'stale'} end
local ep, event_id = delivery_endpoint(id, d[5]), delivery_event(id, d[7])
local etype = delivery_type(id, d[6], d[7])
local attempts = tonumber(d[3]) + 1

redis.call('ZREM', K.inflight .. ep, id)
-- The freed slot goes to the longest-parked delivery. Given a token, this script leases it
-- for the caller at the end (after this attempt's own changes, which may have disabled the
-- endpoint), which saves a round trip per delivery to an endpoint at its limit; without,
-- its due entry two seconds on brings it to the scheduler.
local parked = redis.call('ZPOPMIN', K.parked .. ep)
if parked[1] and next_token == '' then redis.call('ZADD', K.due, now + 2000, parked[1]) end

local ep_key = K.endpoint .. ep
local ep_exists = redis.call('EXISTS', ep_key) == 1
-- Operational events about operational events could chase each other forever.
local tell = ep_exists and not OPS_TYPES[etype]

local function disabled(reason)
  if disable_endpoint(ep, reason, now) and tell then
    emit_ops(ctx, 'endpoint.disabled', {endpoint_id = ep, reason = reason})
  end
end

local status
if outcome == 'ok' then
  status = 'succeeded'
  redis.call('ZREM', K.due, id)
  if ep_exists then
    local troubled = redis.call('HGET', ep_key, 'troubled')
    redis.call('HDEL', ep_key, 'failing_since', 'troubled')
    if troubled and tell then emit_ops(ctx, 'endpoint.recovered', {endpoint_id = ep}) end
  end
else
  if ep_exists then redis.call('HSETNX', ep_key, 'failing_since', now) end
  if outcome == 'gone' then
    -- 410 Gone: the receiver asks us to stop. Kept as 'disabled' so a recovery re-sends it.
    status = 'disabled'
    redis.call('ZREM', K.due, id)
    if ep_exists then redis.call('HSET', ep_key, 'troubled', '1') end
    disabled('gone')
  elseif delay < 0 or attempts >= tonumber(d[4]) then
    status = 'failed'
    redis.call('ZREM', K.due, id)
    if ep_exists then
      redis.call('HSET', ep_key, 'troubled', '1')
      if tell then
        emit_ops(ctx, 'delivery.exhausted', {delivery_id = id, event_id = event_id,
          endpoint_id = ep, event_type = etype, attempts = attempts,
          last_status_code = tonumber(code) or cjson.null,
          last_error = (err ~= '' and err) or cjson.null})
      end
      local since = tonumber(redis.call('HGET', ep_key, 'failing_since'))
      if since and now - since >= disable_after then disabled('failing') end
    end
  else
    status = 'pending'
    redis.call('HSET', key, 'next_at', now + delay)
    redis.call('ZADD', K.due, now + delay, id)
  end
end
-- Nothing dead is kept: the lease is over; a code or error this attempt did not have is
-- absent rather than empty (readers take either for none); a finished delivery needs no
-- next time nor budget (a retry sets both anew).
local set = {'status', status, 'attempts', attempts, 'updated', now, 'class', class}
local dead = {'lease', 'lease_until'}
for _, pair in ipairs({{'code', code}, {'error', err}}) do
  if pair[2] ~= '' then
    table.insert(set, pair[1])
    table.insert(set, pair[2])
  else
    table.insert(dead, pair[1])
  end
end
if status ~= 'pending' then
  table.insert(dead, 'next_at')
  table.insert(dead, 'budget')
end
redis.call('HSET', key, unpack(set))
redis.call('HDEL', key, unpack(dead))
count_outcome(status)
if status ~= 'pending' then count_pending(ep, -1) end
log_state(id, attempt_json)
local created = delivery_created(id, d[8])
if parked[1] and next_token ~= '' then
  return {status, attempts, created,
    lease_one(parked[1], now, next_token, next_lease_ms, next_max)}
end
return {status, attempts, created}
