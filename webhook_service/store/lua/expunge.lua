#!lua
-- Delete an event's payload for good, keeping the event and its deliveries as records.
-- Deliveries not yet sent then fail with 'payload_deleted' when leased (lease.lua).
-- ARGV: event_id, now_ms, sender (the API key id the event must have been sent with;
-- '' = any, for an admin). Returns 1, or 0 when there is no such event of that sender's.
local event_id, now, sender = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local key = K.event .. event_id
local ev = redis.call('HMGET', key, 'type', 'key')
if not ev[1] or (sender ~= '' and ev[2] ~= sender) then return 0 end
if redis.call('HDEL', key, 'body') == 1 then
  redis.call('HSET', key, 'expunged', now)
  redis.call('XADD', K.outbox, '*', LOG.expunge, cjson.encode({ev = event_id, t = now}))
end
return 1
