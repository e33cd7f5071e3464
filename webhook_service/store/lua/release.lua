#!lua flags=allow-oom
-- Let finished work leave Redis once the log holds it. After committing a batch, the shipper
-- names what it saw finish (deliveries that became final, events that fanned out to no one)
-- in log:release, scored by when each may go (the hot window on); this takes those whose
-- time has come. A delivery pending again since (an admin's retry) stays; it is named again
-- when it finishes. An event goes with the last of its deliveries still in Redis (its live
-- count), never while one is in flight.
-- ARGV: now_ms, hot_ms (how long what is named now stays), limit (how many due names one
--       call takes), names (delivery and event ids) the shipper just saw finish...
-- Returns {deliveries released, events released}.
local now, hot, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
for i = 4, #ARGV do redis.call('ZADD', K.release, now + hot, ARGV[i]) end
local due = redis.call('ZRANGEBYSCORE', K.release, '-inf', now, 'LIMIT', 0, limit)
local deliveries, events = 0, 0

local function release_event(key)
  redis.call('DEL', key)
  events = events + 1
end

for _, id in ipairs(due) do
  redis.call('ZREM', K.release, id)
  if string.sub(id, 1, 4) == 'msg_' then
    local live = redis.call('HGET', K.event .. id, 'live')
    if live and tonumber(live) <= 0 then release_event(K.event .. id) end
  else
    local key = K.delivery .. id
    local d = redis.call('HMGET', key, 'status', 'event')
    if d[1] and FINAL[d[1]] then
      redis.call('DEL', key)
      deliveries = deliveries + 1
      local ekey = K.event .. delivery_event(id, d[2])
      if redis.call('EXISTS', ekey) == 1 and redis.call('HINCRBY', ekey, 'live', -1) <= 0 then
        release_event(ekey)
      end
    end
  end
end
return {deliveries, events}
