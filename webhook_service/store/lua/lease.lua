-- Take a lease on each delivery a wake-up names, or say why not. A lease is a token and an
-- expiry; while it holds, no other worker may send. The due entry moves to the lease expiry
-- so that a worker dying mid-send is re-woken by the scheduler, never forgotten.
-- ARGV: now_ms, token, lease_ms, delivery ids...
local now, token, lease_ms = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local out = {}
for i = 4, #ARGV do
  local id = ARGV[i]
  local key = K.delivery .. id
  local d = redis.call('HMGET', key, 'status', 'attempts', 'next_at', 'lease_until', 'event',
    'endpoint')
  if not d[1] then
    out[#out + 1] = {id, 'gone'}
  elseif d[1] ~= 'pending' then
    out[#out + 1] = {id, 'done'}
  elseif tonumber(d[4] or '0') > now then
    out[#out + 1] = {id, 'leased'}
  elseif tonumber(d[3]) > now + 1000 then
    -- A stale wake-up for a retry that is not due yet: the due entry will wake it.
    out[#out + 1] = {id, 'early'}
  else
    local ep = redis.call('HMGET', K.endpoint .. d[6], 'url', 'secrets', 'disabled')
    if not ep[1] then
      redis.call('HSET', key, 'status', 'failed', 'error', 'endpoint_deleted', 'updated', now)
      move_status(id, 'pending', 'failed')
      redis.call('ZREM', K.due, id)
      out[#out + 1] = {id, 'failed'}
    elseif ep[3] == '1' then
      redis.call('HSET', key, 'status', 'disabled', 'updated', now)
      move_status(id, 'pending', 'disabled')
      redis.call('ZREM', K.due, id)
      out[#out + 1] = {id, 'disabled'}
    else
      local ev = redis.call('HMGET', K.event .. d[5], 'body')
      redis.call('HSET', key, 'lease', token, 'lease_until', now + lease_ms)
      redis.call('ZADD', K.due, now + lease_ms, id)
      out[#out + 1] = {id, 'go', d[2], d[5], d[6], ev[1] or '', ep[1], ep[2]}
    end
  end
end
return out
