#!lua flags=allow-oom
-- Hand the scheduler the deliveries whose time has come, and push each one's due time a
-- grace period ahead, so the next pass does not wake it again while its wake-up travels.
-- KEYS[1]: K.due, of one bucket (store/due.py ClaimArgs.keys: the scheduler claims from
--   each), and so K.delivery .. <dlv>
-- ARGV (store/due.py ClaimArgs.argv gives them in this order):
local now = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])  -- the most deliveries one call hands out
local grace = tonumber(ARGV[3])  -- ms each claimed due time moves ahead
-- Returns {id, attempts so far} per delivery claimed, earliest due first (store/due.py
-- Claimed.parse). A due entry whose delivery has left Redis is dropped, not claimed.
local ids = redis.call('ZRANGEBYSCORE', K.due, '-inf', now, 'LIMIT', 0, limit)
local out = {}
for _, id in ipairs(ids) do
  local attempts = redis.call('HGET', K.delivery .. id, 'attempts')
  if attempts then
    redis.call('ZADD', K.due, now + grace, id)
    out[#out + 1] = {id, attempts}
  else
    redis.call('ZREM', K.due, id)
  end
end
return out
