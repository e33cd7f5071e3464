#!lua
-- End a deleted application's pending deliveries, one slice of the due set a call: each
-- ends 'failed' with 'application_deleted' (common.lua fail_unsent, which logs the state to
-- the outbox like every change), leased ones too (the attempt under way is then recorded
-- 'stale', nothing written), and leaves its endpoint's parked set. Every pending delivery
-- is in the due set: by the time it is next due, a leased one by its lease's end, a parked
-- one by its fallback. A delivery's endpoint is named by its id's tail (keys.py "Derived
-- fields"): the endpoint's sequence number (common.lua endpoint_tail), or, for one made
-- before sequence numbers, its id's body (what K.endpoint_seqs maps both to).
-- Refuses while the application still exists: the deliveries of a live one are never ended.
-- KEYS[1]: K.app .. <app>, the application's key (store/app_deletion.py AppEndArgs.keys),
--   whose bucket every other key is of, its due set too: only the deliveries of its
--   bucket's applications are scanned. K.app .. <app> .. K.app_endpoints_suffix,
--   K.endpoint .. <ep>, K.due, K.delivery .. <dlv>, K.parked .. <ep>, K.backlog .. <ep>,
--   K.fifo .. <ep>,
--   K.metrics, K.outbox
-- ARGV (store/app_deletion.py AppEndArgs.argv gives them in this order):
local app = ARGV[1]
local cursor = ARGV[2]            -- where this slice of K.due starts (a ZSCAN cursor; '0'
                                  -- the first)
local count = tonumber(ARGV[3])   -- about how many due entries one call looks at
local now = tonumber(ARGV[4])
-- Returns {outcome, next cursor, deliveries ended} (store/app_deletion.py AppEnded.parse):
-- outcome 'more' (the scan goes on from the cursor), 'scanned' (it went round the whole due
-- set; every delivery pending since it began has been seen) or 'exists' (the application
-- is still there: nothing done).
if redis.call('EXISTS', K.app .. app) == 1 then return {'exists', cursor, 0} end

-- The tails of its endpoints' deliveries -> the endpoint: every due entry is looked up in
-- this alone, so a slice costs the same however many other applications share the set.
local own = {}
for _, ep in ipairs(redis.call('ZRANGE', K.app .. app .. K.app_endpoints_suffix, 0, -1)) do
  own[string.sub(ep, 4)] = ep
  local seq = redis.call('HGET', K.endpoint .. ep, 'seq')
  if seq then own[endpoint_tail(seq)] = ep end
end

local scan = redis.call('ZSCAN', K.due, cursor, 'COUNT', count)
local entries, ended = scan[2], 0
-- ZSCAN answers member, score, member, score...
for i = 1, #entries, 2 do
  local id = entries[i]
  local ep = own[string.sub(id, 31)]
  if ep and redis.call('HGET', K.delivery .. id, 'status') == 'pending' then
    -- What a finished delivery no longer needs (record.lua keeps nothing dead either).
    redis.call('HDEL', K.delivery .. id, 'lease', 'lease_until', 'next_at', 'budget')
    fail_unsent(id, ep, 'application_deleted', now)
    redis.call('ZREM', K.parked .. ep, id)
    ended = ended + 1
  end
end
if scan[1] == '0' then return {'scanned', '0', ended} end
return {'more', scan[1], ended}
