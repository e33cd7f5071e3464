-- Delete an event's payload for good, keeping the event and its deliveries as records.
-- Deliveries not yet sent then fail with 'payload_deleted' when leased (lease.lua).
-- ARGV: event_id, now_ms. Returns 1, or 0 when there is no such event.
local key = K.event .. ARGV[1]
if redis.call('EXISTS', key) == 0 then return 0 end
if redis.call('HDEL', key, 'body') == 1 then redis.call('HSET', key, 'expunged', ARGV[2]) end
return 1
