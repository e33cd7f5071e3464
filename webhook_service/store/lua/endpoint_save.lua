#!lua
-- Create or update an endpoint and its subscriptions together. Disabled endpoints stay
-- subscribed: their events are kept as 'disabled' deliveries until a recovery.
-- Keys (none passed as KEYS): K.endpoint .. <ep>, K.endpoints, K.endpoint_seq,
--   K.endpoint_seqs, K.sub_type .. <type>, K.sub_all, K.sub_ops
-- ARGV (store/endpoints.py EndpointSaveArgs.argv gives them in this order):
local id = ARGV[1]                -- the endpoint
local most = tonumber(ARGV[2])    -- the most endpoints there may be; 0: no limit
-- ARGV[3...]: field/value pairs to write (must include url, event_types and operations)
-- Returns 'created', 'updated', or 'limit_reached' when a new endpoint would pass the limit
-- (and nothing is written): the count is checked here, in the step that adds one, so
-- concurrent creations cannot pass it (store/endpoints.py SaveOutcome).
local key = K.endpoint .. id
local old = redis.call('HMGET', key, 'event_types', 'url')
if not old[2] and most > 0 and redis.call('ZCARD', K.endpoints) >= most then
  return 'limit_reached'
end
if old[2] then unsubscribe(id, old[1]) end
local fields = {}
for i = 3, #ARGV do fields[#fields + 1] = ARGV[i] end
-- A new endpoint gets the next sequence number, which its delivery ids end with (shorter
-- than its id), and endpoint_seqs maps that tail back to it, for good (its deliveries
-- outlive it).
if not old[2] then
  local seq = redis.call('INCR', K.endpoint_seq)
  fields[#fields + 1] = 'seq'
  fields[#fields + 1] = seq
  redis.call('HSET', K.endpoint_seqs, endpoint_tail(seq), id)
end
redis.call('HSET', key, unpack(fields))
local now = redis.call('HMGET', key, 'event_types', 'operations')
subscribe(id, now[1])
if now[2] == '1' then
  redis.call('SADD', K.sub_ops, id)
else
  redis.call('SREM', K.sub_ops, id)
end
redis.call('ZADD', K.endpoints, 0, id)
if old[2] then return 'updated' end
return 'created'
