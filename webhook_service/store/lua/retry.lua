#!lua
-- An admin's retry: each finished delivery named gets one more attempt, now. Deliveries
-- still pending are on their way already and are left alone.
-- ARGV: now_ms, grace_ms, delivery ids...
-- Returns one of 'ok', 'pending', 'missing' per id.
local now, grace = tonumber(ARGV[1]), tonumber(ARGV[2])
local out = {}
for i = 3, #ARGV do
  local id = ARGV[i]
  local key = K.delivery .. id
  local d = redis.call('HMGET', key, 'status', 'attempts')
  if not d[1] then
    out[#out + 1] = 'missing'
  elseif d[1] == 'pending' then
    out[#out + 1] = 'pending'
  else
    redis.call('HSET', key, 'status', 'pending', 'budget', tonumber(d[2]) + 1, 'next_at', now,
      'updated', now)
    redis.call('ZADD', K.due, now + grace, id)
    count_pending(delivery_endpoint(id, redis.call('HGET', key, 'endpoint')), 1)
    log_state(id)
    out[#out + 1] = 'ok'
  end
end
return out
