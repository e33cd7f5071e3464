#!lua flags=allow-oom
-- Let finished work leave Redis once the log holds it. After committing a batch, the shipper
-- names what it saw finish (deliveries that became final, events that fanned out to no one)
-- in log:release, scored by when each may go (the hot window on); this takes those whose
-- time has come. A delivery pending again since (an admin's retry) stays; it is named again
-- when it finishes. An event goes with the last of its deliveries still in Redis (its live
-- count), never while one is in flight.
-- KEYS[1]: K.release, of one bucket (store/release.py ReleaseArgs.keys: the shipper calls
--   each bucket's); the names are of it, and so K.delivery .. <dlv>, K.event .. <msg>
-- ARGV (store/release.py ReleaseArgs.argv gives them in this order):
local now = tonumber(ARGV[1])
local hot = tonumber(ARGV[2])    -- ms what is named now stays
local limit = tonumber(ARGV[3])  -- how many due names one call takes
-- ARGV[4...]: the names (delivery and event ids of the bucket) the shipper just saw finish
-- Returns {deliveries released, events released} (store/release.py Released.parse).
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
