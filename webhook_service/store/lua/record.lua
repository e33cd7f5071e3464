#!lua flags=allow-oom
-- Record one attempt and the delivery's next state, only if we still hold the lease: an
-- attempt is recorded once, and a worker whose lease ran out cannot overwrite the one that
-- took over. Also frees the endpoint's and the application's in-flight slots, which go to
-- the deliveries waiting longest for them, and keeps the endpoint's health:
-- a success clears its failing streak; an exhausted delivery after `disable_after_ms` of
-- failing, or a 410, disables it. Health changes become operational events. A FIFO
-- endpoint's next delivery goes once this one ends (common.lua pending_out), leased here too.
-- The attempt itself goes only to the log outbox (log_state): Redis keeps the delivery's
-- state, the log keeps its history.
-- KEYS[1]: K.delivery .. <dlv>, the delivery's key (store/deliveries.py RecordArgs.keys),
--   whose bucket every other key is of: K.endpoint_seqs, K.event .. <msg>,
--   K.endpoint .. <ep>, K.inflight .. <ep>, K.parked .. <ep>, K.app_inflight .. <app>,
--   K.app_parked .. <app>, K.rate .. <ep>, K.backlog .. <ep>, K.fifo .. <ep>, K.due,
--   K.metrics, K.outbox;
--   for an operational event it causes, K.sub_ops and the new event's keys in the default
--   application's bucket, or K.ops_requests in another (common.lua emit_ops)
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
  ids = {ARGV[12], ARGV[13], ARGV[14]}}  -- their ids, one each (of the default
                                         -- application's bucket)
local next_token = ARGV[15]           -- lease the parked deliveries with it ('' = don't)
local next_lease_ms = tonumber(ARGV[16])  -- that lease's lease_ms,
local next_max = tonumber(ARGV[17])       -- its max_in_flight
local next_app_max = tonumber(ARGV[18])   -- and its app_max (lease.lua's)
local class = ARGV[19]                -- the answer's class (deliveries.py STATUS_CLASSES)
local ep_budget = tonumber(ARGV[20])  -- the endpoint's own attempt budget (the length of
                                      -- its retry schedule); 0: the delivery's own
-- Returns {'stale'}, or {status, attempts, the delivery's creation ms[, a common.lua
-- lease_one row for each parked delivery leased]} (store/deliveries.py Recorded.parse). What
-- the attempt adds to the metrics (its final outcome included) and the endpoint's windows
-- the caller counts (store/counts.py).

local key = K.delivery .. id
local d = redis.call('HMGET', key, 'lease', 'status', 'attempts', 'budget', 'endpoint', 'type',
  'event', 'created', 'fifo')
if d[1] ~= token or d[2] ~= 'pending' then return {'stale'} end
local ep, event_id = delivery_endpoint(id, d[5]), delivery_event(id, d[7])
local attempts = tonumber(d[3]) + 1
-- The event's type, where the delivery leaves it out (common.lua, "Fields a hash leaves
-- out"), and its application, in one read.
local ev = redis.call('HMGET', K.event .. event_id, 'type', 'app')
local etype = d[6] or ev[1]

-- The application's slot, if the lease took one (common.lua capped: '' for none).
local app = capped(ev[2])
redis.call('ZREM', K.inflight .. ep, id)
if app ~= '' then redis.call('ZREM', K.app_inflight .. app, id) end
-- The freed slots go to the endpoint's longest-parked delivery and the application's. Given
-- a token, this script leases them for the caller at the end (after this attempt's own
-- changes, which may have disabled the endpoint), which saves a round trip per delivery to
-- an endpoint or an application at its limit; without, their due entries two seconds on
-- bring them to the scheduler. Each is {id, the score it waited with} or {}.
local ep_parked = redis.call('ZPOPMIN', K.parked .. ep)
local app_parked = {}
if app ~= '' then app_parked = redis.call('ZPOPMIN', K.app_parked .. app) end
if ep_parked[1] and ep_parked[1] == app_parked[1] then
  app_parked[2] = math.min(tonumber(ep_parked[2]), tonumber(app_parked[2]))
  ep_parked = {}
end
if next_token == '' then
  for _, p in ipairs({ep_parked, app_parked}) do
    if p[1] then redis.call('ZADD', K.due, now + 2000, p[1]) end
  end
end

local ep_key = K.endpoint .. ep
-- Whether it exists (an endpoint always has a url) and its health, in one read.
local health = redis.call('HMGET', ep_key, 'url', 'troubled', 'failing_since')
local ep_exists = health[1] ~= false
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
  if ep_exists and (health[2] or health[3]) then
    redis.call('HDEL', ep_key, 'failing_since', 'troubled')
    if health[2] and tell then emit_ops(ctx, 'endpoint.recovered', {endpoint_id = ep}) end
  end
else
  if ep_exists then redis.call('HSETNX', ep_key, 'failing_since', now) end
  if outcome == 'gone' then
    -- 410 Gone: the receiver asks us to stop. Kept as 'disabled' so a recovery re-sends it.
    status = 'disabled'
    redis.call('ZREM', K.due, id)
    if ep_exists then redis.call('HSET', ep_key, 'troubled', '1') end
    disabled('gone')
  elseif delay < 0 or attempts >= (ep_budget > 0 and ep_budget or tonumber(d[4])) then
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
      -- As the HSETNX above left it.
      local since = tonumber(health[3]) or now
      if now - since >= disable_after then disabled('failing') end
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
-- A FIFO line's next head, due now that this one ended: leased below like a parked one.
local next_head = nil
if status ~= 'pending' then next_head = pending_out(ep, id, now, ep_exists, d[9]) end
-- The fields as the HSET and HDEL above left them.
log_fields(id, attempt_json, status, attempts, now, status == 'pending' and now + delay,
  code ~= '' and code, err ~= '' and err, class)
local created = delivery_created(id, d[8])
local out = {status, attempts, created}
if next_token == '' then return out end

-- Application-line deliveries one freed slot is offered to, at most: one whose endpoint is
-- at its own limit or throttled, or that ended meanwhile, cannot use it and hands it on.
local HANDOFFS = 10
local offered = {}
local function lease_next(pick, since)
  offered[pick] = true
  local row = lease_one(pick, now, next_token, next_lease_ms, next_max, next_app_max, since)
  out[#out + 1] = row
  return row[2]
end
local woken = {}
if next_head then woken[#woken + 1] = {next_head, now, false} end
if ep_parked[1] then woken[#woken + 1] = {ep_parked[1], tonumber(ep_parked[2]), false} end
if app_parked[1] then woken[#woken + 1] = {app_parked[1], tonumber(app_parked[2]), true} end
-- The one that waited longer first: it takes the application's slot, and the other parks
-- again in its place (lease_one's since) when that was the last.
table.sort(woken, function(a, b) return a[2] < b[2] end)
for _, w in ipairs(woken) do
  if not offered[w[1]] then
    local why = lease_next(w[1], w[2])
    local tries = 1
    while w[3] and why ~= 'go' and why ~= 'app_busy' and tries < HANDOFFS do
      local p = redis.call('ZPOPMIN', K.app_parked .. app)
      if not p[1] then break end
      if offered[p[1]] then
        -- Offered once in this step and parked again: it keeps its place.
        redis.call('ZADD', K.app_parked .. app, p[2], p[1])
        break
      end
      why = lease_next(p[1], tonumber(p[2]))
      tries = tries + 1
    end
  end
end
return out
