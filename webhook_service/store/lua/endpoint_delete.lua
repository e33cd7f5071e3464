#!lua
-- Remove an endpoint and its subscriptions; its pending deliveries end when next leased.
-- ARGV: id
local id = ARGV[1]
local key = K.endpoint .. id
local old = redis.call('HMGET', key, 'event_types', 'url')
if not old[2] then return 0 end
unsubscribe(id, old[1])
redis.call('SREM', K.sub_ops, id)
redis.call('DEL', key, K.inflight .. id, K.parked .. id, K.rate .. id, K.ep_stats .. id,
  K.backlog .. id)
redis.call('ZREM', K.endpoints, id)
return 1
