#!lua
-- Create or update an endpoint and its subscriptions together, within its application.
-- Disabled endpoints stay subscribed: their events are kept as 'disabled' deliveries until
-- a recovery.
-- KEYS[1]: K.endpoint .. <ep>, the endpoint's key (store/endpoints.py
--   EndpointSaveArgs.keys: an endpoint is made in its application's bucket), whose bucket
--   every other key is of: K.endpoints, K.endpoint_seq (sequence numbers are the bucket's),
--   K.endpoint_seqs, K.app .. <app>, K.app .. <app> .. K.app_endpoints_suffix, K.apps,
--   K.apps_uid, K.sub_type .. <app> .. K.sub_type_infix .. <type>, K.sub_all .. <app>,
--   K.sub_ops, K.fifo .. <ep>, K.delivery .. <dlv>, K.due
-- ARGV (store/endpoints.py EndpointSaveArgs.argv gives them in this order):
local id = ARGV[1]                -- the endpoint
local most = tonumber(ARGV[2])    -- the most endpoints its application may have; 0: no limit
local app = ARGV[3]               -- a new endpoint's application; one that exists stays in
                                  -- its own
-- ARGV[4...]: field/value pairs to write (must include url, event_types, operations,
--   filter and ordering)
-- Returns 'created' or 'updated', or, writing nothing, 'limit_reached' when a new endpoint
-- would pass its application's limit (counted here, in the step that adds one, so
-- concurrent creations cannot pass it) or 'no_app' when its application does not exist
-- (the default one is created instead) (store/endpoints.py SaveOutcome). A change of the
-- endpoint's filter bumps its application's filter_v in the same step: ingest.lua refuses
-- a fan-out the API evaluated with an older version (store/endpoints.py AppFilters).
local key = K.endpoint .. id
local old = redis.call('HMGET', key, 'event_types', 'url', 'app', 'filter', 'ordering')
local new_app = false
if old[2] then
  app = old[3]
else
  if redis.call('EXISTS', K.app .. app) == 0 then
    if app ~= DEFAULT_APP.id then return 'no_app' end
    new_app = true
  end
  if most > 0 and redis.call('ZCARD', K.app .. app .. K.app_endpoints_suffix) >= most then
    return 'limit_reached'
  end
end
if new_app then
  local at = server_ms()
  create_app(app, DEFAULT_APP.name, DEFAULT_APP.uid, '', '', at, at, true)
end
if old[2] then unsubscribe(app, id, old[1]) end
local fields = {}
for i = 4, #ARGV do fields[#fields + 1] = ARGV[i] end
-- A new endpoint gets the next sequence number, which its delivery ids end with (shorter
-- than its id), and endpoint_seqs maps that tail back to it, for good (its deliveries
-- outlive it).
if not old[2] then
  local seq = redis.call('INCR', K.endpoint_seq)
  fields[#fields + 1] = 'seq'
  fields[#fields + 1] = seq
  fields[#fields + 1] = 'app'
  fields[#fields + 1] = app
  redis.call('HSET', K.endpoint_seqs, endpoint_tail(seq), id)
end
redis.call('HSET', key, unpack(fields))
local now = redis.call('HMGET', key, 'event_types', 'operations', 'filter', 'ordering')
subscribe(app, id, now[1])
if now[2] == '1' then
  redis.call('SADD', K.sub_ops, id)
else
  redis.call('SREM', K.sub_ops, id)
end
-- No longer FIFO: its line's deliveries go as any other's. One becoming FIFO lines up the
-- deliveries made from now on; those pending already go as before (README, "FIFO").
if old[5] == 'fifo' and now[4] ~= 'fifo' then
  fifo_release(id, server_ms())
end
if (old[4] or '') ~= (now[3] or '') then
  redis.call('HINCRBY', K.app .. app, 'filter_v', 1)
end
redis.call('ZADD', K.endpoints, 0, id)
redis.call('ZADD', K.app .. app .. K.app_endpoints_suffix, 0, id)
if old[2] then return 'updated' end
return 'created'
