#!lua
-- Replay an event: one new delivery to each endpoint of its application that takes it now
-- (its type and channels), or to the one named, if it does. The new ids start with the
-- replay's own time-ordered part, so they never meet the originals (whose ids start with
-- the event's) and list as new; the originals and their attempt logs stay as they were.
-- KEYS[1]: K.event .. <msg>, the event's key (store/events.py ReplayArgs.keys), whose
--   bucket (its application's; the default application's for ours) every other key is of:
--   K.endpoint .. <ep>, K.sub_ops, K.app .. <app>,
--   K.sub_type .. <app> .. K.sub_type_infix .. <type>, K.sub_all .. <app>,
--   K.delivery .. <dlv>, K.backlog .. <ep>, K.fifo .. <ep>, K.due, K.metrics, K.outbox
-- ARGV (store/events.py ReplayArgs.argv gives them in this order):
local now = tonumber(ARGV[1])
local event_id = ARGV[2]
local part = ARGV[3]                  -- the new ids' part after 'dlv_' (26 characters, of
                                      -- the event's mark: the same bucket)
local budget = tonumber(ARGV[4])      -- attempts each new delivery gets
local grace_ms = tonumber(ARGV[5])    -- ms until a delivery's due entry wakes it anyway
local only = ARGV[6]                  -- the one endpoint ('' = every one subscribed now)
local sender = ARGV[7]                -- the API key id the event must have been sent with
                                      -- ('' = any, for an admin)
local filter_v = ARGV[8]              -- the application's filter version the API evaluated
                                      -- its endpoints' filters with ('' = none: ours)
local filtered_out = ARGV[9]          -- the filtered endpoints the event does not pass now,
                                      -- a JSON list ('' = none)
-- Returns {'ok', ids, pending ids}, or {why}: 'missing', 'no_payload', 'no_endpoint',
-- 'not_subscribed' (its filter too), 'endpoint_disabled', 'stale' (`filter_v` is no longer
-- the application's, as in ingest.lua) (store/events.py ReplayOutcome).
local due_at = now + grace_ms
local ekey = K.event .. event_id

local ev = redis.call('HMGET', ekey, 'type', 'body', 'dlvs', 'key', 'app', 'ch')
-- Another key's event is answered as no event at all: that it exists is not for this caller.
if not ev[1] or (sender ~= '' and ev[4] ~= sender) then return {'missing'} end
if not ev[2] then return {'no_payload'} end
local etype, app = ev[1], ev[5]
if filter_v ~= '' and (redis.call('HGET', K.app .. app, 'filter_v') or '0') ~= filter_v then
  return {'stale'}
end
local out = {}
if filtered_out ~= '' then
  for _, ep in ipairs(cjson.decode(filtered_out)) do out[ep] = true end
end
-- Ours (operational) go to the operations endpoints by their flag, whatever their
-- channels; any other to its application's endpoints that take its type and channels.
local wanted = nil
if not OPS_TYPES[etype] then
  local channels = {}
  if ev[6] then channels = cjson.decode(ev[6]) end
  wanted = channel_filter(channels)
end

local function subscribed(ep, ep_channels)
  if OPS_TYPES[etype] then return redis.call('SISMEMBER', K.sub_ops, ep) == 1 end
  return (redis.call('SISMEMBER', K.sub_type .. app .. K.sub_type_infix .. etype, ep) == 1
    or redis.call('SISMEMBER', K.sub_all .. app, ep) == 1) and takes(wanted, ep_channels)
    and not out[ep]
end

local endpoints
if only ~= '' then
  local ep = redis.call('HMGET', K.endpoint .. only, 'url', 'disabled', 'app', 'channels')
  -- Another application's endpoint is not there for this event.
  if not ep[1] or (not OPS_TYPES[etype] and ep[3] ~= app) then return {'no_endpoint'} end
  if not subscribed(only, ep[4]) then return {'not_subscribed'} end
  if ep[2] == '1' then return {'endpoint_disabled'} end
  endpoints = {only}
elseif OPS_TYPES[etype] then
  endpoints = redis.call('SMEMBERS', K.sub_ops)
else
  endpoints = subscribers(app, etype)
end
local ids, pending, reached, statuses = {}, {}, {}, {}
for _, ep in ipairs(endpoints) do
  local id, status, wake = nil, nil, false
  if not out[ep] then
    id, status, wake = create_delivery(now, part, event_id, ep, etype, budget, due_at, wanted)
  end
  if id then
    ids[#ids + 1] = id
    reached[#reached + 1] = ep
    statuses[#statuses + 1] = status
    if wake then pending[#pending + 1] = id end
  end
end
if #ids > 0 then
  local all = table.concat(ids, ',')
  if ev[3] and ev[3] ~= '' then all = ev[3] .. ',' .. all end
  redis.call('HSET', ekey, 'dlvs', all)
  redis.call('HINCRBY', ekey, 'live', #ids)
  redis.call('XADD', K.outbox, '*', LOG.replay, cjson.encode({ev = event_id, type = etype,
    app = app, t = now, dlv = delivery_rows(ids, reached, statuses)}))
end
return {'ok', ids, pending}
