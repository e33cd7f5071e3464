-- Record one attempt and the delivery's next state, only if we still hold the lease: an
-- attempt is recorded once, and a worker whose lease ran out cannot overwrite the one that
-- took over.
-- ARGV: now_ms, token, id, attempt_json, success ('1'|'0'), delay_ms (-1 = no more tries),
--       code ('' = none), error ('' = none)
local now, token, id = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local key = K.delivery .. id
local d = redis.call('HMGET', key, 'lease', 'status', 'attempts', 'budget')
if d[1] ~= token or d[2] ~= 'pending' then return {'stale'} end
local attempts = tonumber(d[3]) + 1
local delay = tonumber(ARGV[6])
redis.call('RPUSH', key .. K.attempts_suffix, ARGV[4])
local status
if ARGV[5] == '1' then
  status = 'succeeded'
  redis.call('ZREM', K.due, id)
elseif delay < 0 or attempts >= tonumber(d[4]) then
  status = 'failed'
  redis.call('ZREM', K.due, id)
else
  status = 'pending'
  redis.call('HSET', key, 'next_at', now + delay)
  redis.call('ZADD', K.due, now + delay, id)
end
redis.call('HSET', key, 'status', status, 'attempts', attempts, 'updated', now,
  'code', ARGV[7], 'error', ARGV[8])
redis.call('HDEL', key, 'lease', 'lease_until')
move_status(id, 'pending', status)
return {status, attempts}
