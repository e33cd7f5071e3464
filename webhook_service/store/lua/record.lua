-- Record one attempt and the delivery's next state, only if we still hold the lease: an
-- attempt is recorded once, and a worker whose lease ran out cannot overwrite the one that
-- took over. Also frees the endpoint's in-flight slot and keeps the endpoint's health:
-- a success clears its failing streak; an exhausted delivery after `disable_after_ms` of
-- failing, or a 410, disables it. Health changes become operational events.
-- ARGV: now_ms, token, id, attempt_json, outcome ('ok'|'fail'|'gone'),
--       delay_ms (-1 = no more tries), code ('' = none), error ('' = none),
--       disable_after_ms, now_iso, ops_budget, ops event ids (3)
local now, token, id = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local key = K.delivery .. id
local d = redis.call('HMGET', key, 'lease', 'status', 'attempts', 'budget', 'endpoint', 'type',
  'event')
if d[1] ~= token or d[2] ~= 'pending' then return {'stale'} end
local ep, etype = d[5], d[6]
local outcome, delay, code, err = ARGV[5], tonumber(ARGV[6]), ARGV[7], ARGV[8]
local attempts = tonumber(d[3]) + 1
redis.call('RPUSH', key .. K.attempts_suffix, ARGV[4])

redis.call('ZREM', K.inflight .. ep, id)
-- The freed slot goes to the longest-parked delivery: the caller sends it next. Its due
-- entry, two seconds on, is the scheduler's cue should the caller die first.
local parked = redis.call('ZPOPMIN', K.parked .. ep)
local next_id = parked[1] or ''
if parked[1] then redis.call('ZADD', K.due, now + 2000, parked[1]) end

local ctx = {now = now, iso = ARGV[10], budget = tonumber(ARGV[11]),
  ids = {ARGV[12], ARGV[13], ARGV[14]}}
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
    redis.call('HSET', ep_key, 'last_success', now)
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
        emit_ops(ctx, 'delivery.exhausted', {delivery_id = id, event_id = d[7],
          endpoint_id = ep, event_type = etype, attempts = attempts,
          last_status_code = tonumber(code) or cjson.null,
          last_error = (err ~= '' and err) or cjson.null})
      end
      local since = tonumber(redis.call('HGET', ep_key, 'failing_since'))
      if since and now - since >= tonumber(ARGV[9]) then disabled('failing') end
    end
  else
    status = 'pending'
    redis.call('HSET', key, 'next_at', now + delay)
    redis.call('ZADD', K.due, now + delay, id)
  end
end
redis.call('HSET', key, 'status', status, 'attempts', attempts, 'updated', now,
  'code', code, 'error', err)
redis.call('HDEL', key, 'lease', 'lease_until')
note_attempt(id, ep, attempts, status, code, err, ARGV[4], now)
move_status(id, 'pending', status)
return {status, attempts, next_id}
