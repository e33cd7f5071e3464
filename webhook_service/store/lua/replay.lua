#!lua
-- Replay an event: one new delivery to each endpoint subscribed to its type now, or to the
-- one named, if it is subscribed. The new ids start with the replay's own time-ordered
-- part, so they never meet the originals (whose ids start with the event's) and list as
-- new; the originals and their attempt logs stay as they were.
-- Keys (none passed as KEYS): K.event .. <msg>, K.endpoint .. <ep>, K.sub_ops,
--   K.sub_type .. <type>, K.sub_all, K.delivery .. <dlv>, K.backlog .. <ep>, K.due,
--   K.metrics, K.outbox
-- ARGV (store/events.py ReplayArgs.argv gives them in this order):
local now = tonumber(ARGV[1])
local event_id = ARGV[2]
local part = ARGV[3]                  -- the new ids' part after 'dlv_' (26 characters)
local budget = tonumber(ARGV[4])      -- attempts each new delivery gets
local grace_ms = tonumber(ARGV[5])    -- ms until a delivery's due entry wakes it anyway
local only = ARGV[6]                  -- the one endpoint ('' = every one subscribed now)
local sender = ARGV[7]                -- the API key id the event must have been sent with
                                      -- ('' = any, for an admin)
-- Returns {'ok', ids, pending ids}, or {why}: 'missing', 'no_payload', 'no_endpoint',
-- 'not_subscribed', 'endpoint_disabled' (store/events.py ReplayOutcome).
local due_at = now + grace_ms
local ekey = K.event .. event_id

-- Whether a new event of this type would reach the endpoint: ours (operational) by its
-- operations flag, any other by its event_types (none: every type).
local function subscribed(ep, etype)
  if OPS_TYPES[etype] then return redis.call('SISMEMBER', K.sub_ops, ep) == 1 end
  return redis.call('SISMEMBER', K.sub_type .. etype, ep) == 1
    or redis.call('SISMEMBER', K.sub_all, ep) == 1
end

local ev = redis.call('HMGET', ekey, 'type', 'body', 'dlvs', 'key')
-- Another key's event is answered as no event at all: that it exists is not for this caller.
if not ev[1] or (sender ~= '' and ev[4] ~= sender) then return {'missing'} end
if not ev[2] then return {'no_payload'} end
local endpoints
if only ~= '' then
  local ep = redis.call('HMGET', K.endpoint .. only, 'url', 'disabled')
  if not ep[1] then return {'no_endpoint'} end
  if not subscribed(only, ev[1]) then return {'not_subscribed'} end
  if ep[2] == '1' then return {'endpoint_disabled'} end
  endpoints = {only}
elseif OPS_TYPES[ev[1]] then
  endpoints = redis.call('SMEMBERS', K.sub_ops)
else
  endpoints = redis.call('SUNION', K.sub_type .. ev[1], K.sub_all)
end
local ids, pending, statuses = {}, {}, {}
for i, ep in ipairs(endpoints) do
  local id, status = create_delivery(now, part, event_id, ep, ev[1], budget, due_at)
  ids[i] = id
  statuses[i] = status
  if status == 'pending' then pending[#pending + 1] = id end
end
if #ids > 0 then
  local all = table.concat(ids, ',')
  if ev[3] and ev[3] ~= '' then all = ev[3] .. ',' .. all end
  redis.call('HSET', ekey, 'dlvs', all)
  redis.call('HINCRBY', ekey, 'live', #ids)
  redis.call('XADD', K.outbox, '*', LOG.replay, cjson.encode({ev = event_id, type = ev[1],
    t = now, dlv = delivery_rows(ids, endpoints, statuses)}))
end
return {'ok', ids, pending}
