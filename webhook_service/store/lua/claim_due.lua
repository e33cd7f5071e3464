#!lua flags=allow-oom
-- Hand the scheduler the deliveries whose time has come, and push each one's due time a
-- grace period ahead, so the next pass does not wake it again while its wake-up travels.
-- ARGV: now_ms, limit, grace_ms
local now = tonumber(ARGV[1])
local ids = redis.call('ZRANGEBYSCORE', K.due, '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
local out = {}
for _, id in ipairs(ids) do
  local attempts = redis.call('HGET', K.delivery .. id, 'attempts')
  if attempts then
    redis.call('ZADD', K.due, now + tonumber(ARGV[3]), id)
    out[#out + 1] = {id, attempts}
  else
    redis.call('ZREM', K.due, id)
  end
end
return out
