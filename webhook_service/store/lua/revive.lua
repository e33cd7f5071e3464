#!lua
-- Bring finished work back from the log into Redis, so an admin's retry, a recovery, a
-- replay or an expunge can act on it as on work still in flight (store/revive.py reads the
-- rows from the log and calls this). What Redis holds already is left as it is.
-- KEYS[1]: K.due, of the bucket every event and delivery named is of (store/revive.py
--   Revival.keys: one call a bucket); every other key is of it too: K.event .. <msg>,
--   K.release, K.delivery .. <dlv>, K.endpoint_seqs, K.endpoint .. <ep>, K.backlog .. <ep>,
--   K.fifo .. <ep>,
--   K.outbox
-- ARGV (store/revive.py Revival.argv gives them in this order):
local now = tonumber(ARGV[1])
local grace = tonumber(ARGV[2])  -- ms to a revived delivery's due entry, the safety net for
                                 -- the wake-up its caller sends
local hot = tonumber(ARGV[3])    -- ms a restored event stays named for release
-- Events (JSON list of {id, type, key, app?, ch?, body?, expunged?}; app absent: one of our
-- operational events, of no application; ch: its channels, JSON text): each restored if
-- absent, with no
-- live delivery, and named for release hot ms on (release.lua keeps it while a delivery
-- revived below, or a replay's, is live).
local events = cjson.decode(ARGV[4])
-- Deliveries (JSON list of {id, event, attempts}): each absent one made pending with one
-- attempt more in its budget, due at once (after grace), its state logged.
local deliveries = cjson.decode(ARGV[5])
-- Returns one of 'ok' (revived), 'present' (Redis had it) per delivery, in order
-- (store/revive.py Revived).

for _, e in ipairs(events) do
  local ekey = K.event .. e.id
  if redis.call('EXISTS', ekey) == 0 then
    redis.call('HSET', ekey, 'type', e.type, 'key', e.key, 'app', e.app or '', 'dlvs', '',
      'live', 0)
    if e.body then redis.call('HSET', ekey, 'body', e.body) end
    if e.ch then redis.call('HSET', ekey, 'ch', e.ch) end
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
    pending_in(delivery_endpoint(d.id, nil), d.id, now + grace, now)
    log_state(d.id)
    out[i] = 'ok'
  end
end
return out
