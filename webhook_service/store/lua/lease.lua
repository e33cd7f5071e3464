-- Take a lease on each delivery a wake-up names, or say why not. A lease is a token and an
-- expiry; while it holds, no other worker may send. The due entry moves to the lease expiry
-- so that a worker dying mid-send is re-woken by the scheduler, never forgotten.
-- Per-endpoint limits live here, so they hold across every worker: at most `max_in_flight`
-- leases per endpoint (the rest park until a slot frees) and the endpoint's rate_limit.
-- ARGV: now_ms, token, lease_ms, max_in_flight, delivery ids...
local now, token, lease_ms = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local max_in_flight = tonumber(ARGV[4])
local out = {}
for i = 5, #ARGV do
  local id = ARGV[i]
  local key = K.delivery .. id
  local d = redis.call('HMGET', key, 'status', 'attempts', 'next_at', 'lease_until', 'event',
    'endpoint')
  if not d[1] then
    redis.call('ZREM', K.due, id)
    out[#out + 1] = {id, 'gone'}
  elseif d[1] ~= 'pending' then
    redis.call('ZREM', K.due, id)
    out[#out + 1] = {id, 'done'}
  elseif tonumber(d[4] or '0') > now then
    out[#out + 1] = {id, 'leased'}
  elseif tonumber(d[3]) > now + 1000 then
    -- A stale wake-up for a retry that is not due yet: the due entry will wake it.
    out[#out + 1] = {id, 'early'}
  else
    local ep_id = d[6]
    local ep = redis.call('HMGET', K.endpoint .. ep_id, 'url', 'secrets', 'disabled',
      'rate_limit', 'headers')
    local inflight = K.inflight .. ep_id
    if ep[1] then redis.call('ZREMRANGEBYSCORE', inflight, '-inf', now) end
    local rate = tonumber(ep[4] or '') or 0
    if not ep[1] then
      fail_unsent(id, 'endpoint_deleted', now)
      out[#out + 1] = {id, 'failed'}
    elseif redis.call('HEXISTS', K.event .. d[5], 'body') == 0 then
      -- An admin expunged the payload: there is nothing left to send.
      fail_unsent(id, 'payload_deleted', now)
      redis.call('ZREM', K.parked .. ep_id, id)
      out[#out + 1] = {id, 'failed'}
    elseif ep[3] == '1' then
      redis.call('HSET', key, 'status', 'disabled', 'updated', now)
      move_status(id, 'pending', 'disabled')
      redis.call('ZREM', K.due, id)
      redis.call('ZREM', K.parked .. ep_id, id)
      out[#out + 1] = {id, 'disabled'}
    elseif redis.call('ZCARD', inflight) >= max_in_flight then
      -- Wait for a slot: the send that frees one wakes the longest-parked delivery. The due
      -- entry is only the fallback, should no slot free in a whole lease.
      redis.call('ZADD', K.parked .. ep_id, 'NX', now, id)
      redis.call('ZADD', K.due, now + lease_ms, id)
      out[#out + 1] = {id, 'busy'}
    else
      local wait = 0
      if rate > 0 then wait = gcra(K.rate .. ep_id, now, rate, math.max(1, math.floor(rate))) end
      if wait > 0 then
        redis.call('ZADD', K.due, now + wait, id)
        out[#out + 1] = {id, 'throttled'}
      else
        local ev = redis.call('HMGET', K.event .. d[5], 'body')
        redis.call('HSET', key, 'lease', token, 'lease_until', now + lease_ms)
        redis.call('ZADD', K.due, now + lease_ms, id)
        redis.call('ZADD', inflight, now + lease_ms, id)
        redis.call('ZREM', K.parked .. ep_id, id)
        out[#out + 1] = {id, 'go', d[2], d[5], ep_id, ev[1] or '', ep[1], ep[2], ep[5] or ''}
      end
    end
  end
end
return out
