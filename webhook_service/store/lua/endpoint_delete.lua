#!lua
-- Remove an endpoint and its subscriptions; its pending deliveries end when next leased.
-- KEYS[1]: K.endpoint .. <ep>, the endpoint's key (store/endpoints.py
--   EndpointDeleteArgs.keys), whose bucket (its application's) every other key is of:
--   K.sub_type .. <app> .. K.sub_type_infix .. <type>, K.sub_all .. <app>, K.sub_ops,
--   K.inflight .. <ep>, K.parked .. <ep>, K.rate .. <ep>, K.ep_stats .. <ep>,
--   K.backlog .. <ep>, K.fifo .. <ep>, K.endpoints, K.app .. <app> .. K.app_endpoints_suffix
-- ARGV (store/endpoints.py EndpointDeleteArgs.argv gives them in this order):
local id = ARGV[1]  -- the endpoint
-- Returns 1, or 0 when there is no such endpoint. Its entry in K.endpoint_seqs stays: its
-- deliveries outlive it, and their ids still name it.
local key = K.endpoint .. id
local old = redis.call('HMGET', key, 'event_types', 'url', 'app')
if not old[2] then return 0 end
unsubscribe(old[3], id, old[1])
-- Its FIFO line's deliveries end as the others do, when next leased: all due now.
fifo_release(id, server_ms())
redis.call('SREM', K.sub_ops, id)
redis.call('DEL', key, K.inflight .. id, K.parked .. id, K.rate .. id, K.ep_stats .. id,
  K.backlog .. id)
redis.call('ZREM', K.endpoints, id)
redis.call('ZREM', K.app .. old[3] .. K.app_endpoints_suffix, id)
return 1
