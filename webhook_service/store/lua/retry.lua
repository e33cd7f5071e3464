#!lua
-- An admin's retry: each finished delivery named gets one more attempt, now. Deliveries
-- still pending are on their way already and are left alone.
-- KEYS[1]: K.due, of the bucket every delivery named is of (store/deliveries.py
--   RetryArgs.keys); every other key is of it too: K.delivery .. <dlv>, K.endpoint_seqs,
--   K.endpoint .. <ep>, K.backlog .. <ep>, K.fifo .. <ep>, K.outbox
-- ARGV (store/deliveries.py RetryArgs.argv gives them in this order):
local now = tonumber(ARGV[1])    -- its next_at
local grace = tonumber(ARGV[2])  -- ms on to its due entry: the API wakes it at once
-- ARGV[3]...: the delivery ids.
-- Returns per id, in order, 'ok' | 'pending' | 'missing' (store/deliveries.py RetryOutcome).
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
    pending_in(delivery_endpoint(id, redis.call('HGET', key, 'endpoint')), id, now + grace, now)
    log_state(id)
    out[#out + 1] = 'ok'
  end
end
return out
