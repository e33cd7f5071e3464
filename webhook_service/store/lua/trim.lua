-- Retention: delete finished deliveries (with their attempts and index entries) created
-- before the cutoff, and each such event once none of its deliveries is left. A pending
-- delivery is never deleted, and keeps its event. Events are walked oldest first from a
-- cursor kept between runs; one run examines at most `budget` deliveries, so it stays
-- short however much has expired. Reaching the cutoff resets the cursor, so events kept
-- for a pending delivery are looked at again on the next round.
-- ARGV: cutoff event id, cutoff delivery id (both exclusive), budget
-- Returns {events deleted, deliveries deleted}.
local event_cutoff, delivery_cutoff, budget = ARGV[1], ARGV[2], tonumber(ARGV[3])
local cursor = redis.call('GET', K.retention_cursor)
local lower = '-'
if cursor then lower = '(' .. cursor end
local events = redis.call('ZRANGEBYLEX', K.events_index, lower, '(' .. event_cutoff,
  'LIMIT', 0, budget)
if #events == 0 then
  redis.call('DEL', K.retention_cursor)
  return {0, 0}
end

local function delete_delivery(id, d)
  local status, ep, etype, class, attempts = d[1], d[2], d[3], d[4], d[5]
  redis.call('ZREM', K.dlv_index, id)
  redis.call('ZREM', K.dlv_by_endpoint .. ep, id)
  redis.call('ZREM', K.dlv_by_status .. status, id)
  redis.call('ZREM', K.dlv_by_ep_status .. ep .. ':' .. status, id)
  redis.call('ZREM', K.dlv_by_type .. etype, id)
  redis.call('ZREM', K.dlv_by_attempts .. attempts, id)
  if class then
    redis.call('ZREM', K.dlv_by_class .. class, id)
    redis.call('ZREM', K.dlv_by_ep_class .. ep .. ':' .. class, id)
  end
  redis.call('ZREM', K.due, id)
  redis.call('DEL', K.delivery .. id, K.delivery .. id .. K.attempts_suffix)
end

local spent, events_deleted, deliveries_deleted = 0, 0, 0
for _, event_id in ipairs(events) do
  local ekey = K.event .. event_id
  local ev = redis.call('HMGET', ekey, 'type', 'key', 'dlvs')
  local kept, unfinished = {}, false
  local ids, entries = event_deliveries(event_id, ev[3])
  for i, id in ipairs(ids) do
    if spent >= budget then
      kept[#kept + 1] = entries[i]
      unfinished = true
    else
      spent = spent + 1
      local d = redis.call('HMGET', K.delivery .. id, 'status', 'endpoint', 'type', 'class',
        'attempts')
      if d[1] == 'pending' or id >= delivery_cutoff then
        kept[#kept + 1] = entries[i]
      elseif d[1] then
        -- Fields the hash leaves out (common.lua): its id's endpoint, its event's type.
        d[2] = delivery_endpoint(id, d[2])
        d[3] = d[3] or ev[1]
        delete_delivery(id, d)
        deliveries_deleted = deliveries_deleted + 1
      end
    end
  end
  if #kept == 0 then
    redis.call('DEL', ekey)
    redis.call('ZREM', K.events_index, event_id)
    redis.call('ZREM', K.events_by_type .. (ev[1] or ''), event_id)
    redis.call('ZREM', K.events_by_key .. (ev[2] or ''), event_id)
    events_deleted = events_deleted + 1
  else
    redis.call('HSET', ekey, 'dlvs', table.concat(kept, ','))
  end
  -- An event cut short by the budget is walked again from where it stands next time.
  if unfinished then break end
  redis.call('SET', K.retention_cursor, event_id)
  spent = spent + 1
  if spent >= budget then break end
end
return {events_deleted, deliveries_deleted}
