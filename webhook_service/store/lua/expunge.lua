-- Delete an event's payload for good, keeping the event and its deliveries as records.
-- Deliveries not yet sent then fail with 'payload_deleted' when leased (lease.lua).
-- ARGV: event_id, now_ms, sender (the API key id the event must have been sent with;
-- '' = any, for an admin). Returns 1, or 0 when there is no such event of that sender's.
local key = K.event .. ARGV[1]
local ev = redis.call('HMGET', key, 'type', 'key')
if not ev[1] or (ARGV[3] ~= '' and ev[2] ~= ARGV[3]) then return 0 end
if redis.call('HDEL', key, 'body') == 1 then
  redis.call('HSET', key, 'expunged', ARGV[2])
  redis.call('XADD', K.outbox, '*', LOG.expunge,
    cjson.encode({ev = ARGV[1], t = tonumber(ARGV[2])}))
end
return 1
