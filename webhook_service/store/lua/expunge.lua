#!lua
-- Delete an event's payload for good, keeping the event and its deliveries as records.
-- Deliveries not yet sent then fail with 'payload_deleted' when leased (lease.lua).
-- KEYS[1]: K.event .. <msg>, the event's key (store/events.py ExpungeArgs.keys), and so
--   K.outbox of its bucket
-- ARGV (store/events.py ExpungeArgs.argv gives them in this order):
local event_id = ARGV[1]
local now = tonumber(ARGV[2])
local sender = ARGV[3]                -- the API key id the event must have been sent with
                                      -- ('' = any, for an admin)
-- Returns {'expunged'} (whether the payload went now or before), or {'missing'} when there
-- is no such event of that sender's (store/events.py ExpungeOutcome).
local key = K.event .. event_id
local ev = redis.call('HMGET', key, 'type', 'key')
if not ev[1] or (sender ~= '' and ev[2] ~= sender) then return {'missing'} end
if redis.call('HDEL', key, 'body') == 1 then
  redis.call('HSET', key, 'expunged', now)
  redis.call('XADD', K.outbox, '*', LOG.expunge, cjson.encode({ev = event_id, t = now}))
end
return {'expunged'}
