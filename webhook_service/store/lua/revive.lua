#!lua
-- Bring finished work back from the log into Redis, so an admin's retry, a recovery, a
-- replay or an expunge can act on it as on work still in flight (store/revive.py reads the
-- rows from the log and calls this). What Redis holds already is left as it is.
-- ARGV: now_ms, grace_ms, hot_ms,
--       events (JSON list of {id, type, key, body?, expunged?}): each restored if absent,
--         with no live delivery, and named for release hot_ms on (release.lua keeps it
--         while a delivery revived below, or a replay's, is live),
--       deliveries (JSON list of {id, event, attempts}): each absent one made pending with
--         one attempt more in its budget, due at once (after grace_ms, the safety net for
--         the wake-up its caller sends), its state logged
-- Returns one of 'ok', 'present' per delivery, in order.
local now, grace, hot = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local events, deliveries = cjson.decode(ARGV[4]), cjson.decode(ARGV[5])

for _, e in ipairs(events) do
  local ekey = K.event .. e.id
  if redis.call('EXISTS', ekey) == 0 then
    redis.call('HSET', ekey, 'type', e.type, 'key', e.key, 'dlvs', '', 'live', 0)
    if e.body then redis.call('HSET', ekey, 'body', e.body) end
    if e.expunged then redis.call('HSET', ekey, 'expunged', e.expunged) end
    redis.call('ZADD', K.release, now + hot, e.id)
  end
end

local out = {}
for i, d in ipairs(deliveries) do
  local key = K.delivery .. d.id
  if redis.call('EXISTS', key) == 1 then
    out[i] = 'present'
  else
    local fields = {'status', 'pending', 'attempts', d.attempts, 'budget', d.attempts + 1,
      'next_at', now, 'updated', now}
    if delivery_event(d.id, nil) ~= d.event then
      -- A replay's delivery: its id does not name its event (keys.py, "Derived fields").
      local etype = redis.call('HGET', K.event .. d.event, 'type')
      for _, f in ipairs({'event', d.event, 'type', etype}) do table.insert(fields, f) end
    end
    redis.call('HSET', key, unpack(fields))
    redis.call('HINCRBY', K.event .. d.event, 'live', 1)
    redis.call('ZADD', K.due, now + grace, d.id)
    count_pending(delivery_endpoint(d.id, nil), 1)
    log_state(d.id)
    out[i] = 'ok'
  end
end
return out
