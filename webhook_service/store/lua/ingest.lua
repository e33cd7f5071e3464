-- Accept one event: check its idempotency key, write the event, one delivery per matching
-- enabled endpoint, their indexes and due entries, and the idempotency record, or nothing.
-- ARGV: now_ms, event_id, type, body, key_id, idem_key ('' = none), idem_hash,
--       idem_ttl_s, idem_state ('done' | 'in_flight'), idem_until_ms, budget, grace_ms
local now = tonumber(ARGV[1])
local event_id, etype, body, key_id = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local idem_key = ARGV[6]

if idem_key ~= '' then
  local rec = redis.call('HMGET', idem_key, 'hash', 'state', 'event', 'until')
  if rec[1] then
    if rec[1] ~= ARGV[7] then return {'mismatch'} end
    if rec[2] == 'in_flight' and tonumber(rec[4]) > now then return {'in_flight'} end
    local ev = redis.call('HMGET', K.event .. rec[3], 'type', 'created', 'dlvs')
    local count = 0
    if ev[3] and ev[3] ~= '' then
      local _, commas = string.gsub(ev[3], ',', '')
      count = commas + 1
    end
    return {'replay', rec[3], ev[1] or etype, ev[2] or '0', count}
  end
end

local budget, due_at = tonumber(ARGV[11]), now + tonumber(ARGV[12])
local endpoints = redis.call('SUNION', K.sub_type .. etype, K.sub_all)
local event_part = string.sub(event_id, 5)
local ids = {}
for i, ep in ipairs(endpoints) do
  local id = 'dlv_' .. event_part .. string.sub(ep, 4)
  ids[i] = id
  redis.call('HSET', K.delivery .. id, 'event', event_id, 'endpoint', ep, 'type', etype,
    'status', 'pending', 'attempts', 0, 'budget', budget, 'next_at', now,
    'created', now, 'updated', now)
  redis.call('ZADD', K.dlv_index, 0, id)
  redis.call('ZADD', K.dlv_by_endpoint .. ep, 0, id)
  redis.call('ZADD', K.dlv_by_status .. 'pending', 0, id)
  redis.call('ZADD', K.dlv_by_type .. etype, 0, id)
  -- The API wakes a worker right after this script; the due entry is the safety net that
  -- re-wakes the delivery if that wake-up is lost.
  redis.call('ZADD', K.due, due_at, id)
end
redis.call('HSET', K.event .. event_id, 'type', etype, 'created', now, 'body', body,
  'key', key_id, 'dlvs', table.concat(ids, ','))
redis.call('ZADD', K.events_index, 0, event_id)

if idem_key ~= '' then
  redis.call('HSET', idem_key, 'hash', ARGV[7], 'state', ARGV[9], 'event', event_id,
    'until', ARGV[10])
  redis.call('EXPIRE', idem_key, ARGV[8])
end
return {'created', ids}
