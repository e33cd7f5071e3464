-- An admin's retry: a finished delivery gets one more attempt, now.
-- ARGV: now_ms, id, grace_ms
local now, id = tonumber(ARGV[1]), ARGV[2]
local key = K.delivery .. id
local d = redis.call('HMGET', key, 'status', 'attempts')
if not d[1] then return 'missing' end
if d[1] == 'pending' then return 'pending' end
redis.call('HSET', key, 'status', 'pending', 'budget', tonumber(d[2]) + 1, 'next_at', now,
  'updated', now)
move_status(id, d[1], 'pending')
redis.call('ZADD', K.due, now + tonumber(ARGV[3]), id)
return 'ok'
