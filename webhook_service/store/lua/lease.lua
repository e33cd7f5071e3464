#!lua flags=allow-oom
-- Take a lease on each delivery a wake-up names, or say why not. A lease is a token and an
-- expiry; while it holds, no other worker may send. The due entry moves to the lease expiry
-- so that a worker dying mid-send is re-woken by the scheduler, never forgotten.
-- The limits live here, so they hold across every worker: at most `max_in_flight` leases
-- per endpoint and `app_max` per application (the rest park until a slot frees), and the
-- endpoint's rate_limit.
-- KEYS[1]: K.due, of the bucket every delivery named is of (store/deliveries.py
--   LeaseArgs.keys: a caller's ids of several buckets make one call each); every other key
--   is of it too: K.delivery .. <dlv>, K.endpoint_seqs,
--   K.endpoint .. <ep>, K.event .. <msg>, K.inflight .. <ep>, K.parked .. <ep>,
--   K.app_inflight .. <app>, K.app_parked .. <app>, K.rate .. <ep>, K.backlog .. <ep>,
--   K.fifo .. <ep>,
--   K.metrics, K.outbox, K.wakeup_more .. <task>
-- ARGV (store/deliveries.py LeaseArgs.argv gives them in this order):
local now = tonumber(ARGV[1])
local token = ARGV[2]                    -- the lease to take; record.lua acts only for it
local lease_ms = tonumber(ARGV[3])       -- how long it holds
local max_in_flight = tonumber(ARGV[4])  -- the most leases held per endpoint
local app_max = tonumber(ARGV[5])        -- the most held per application (0: no cap)
-- ARGV[6]...: the delivery ids. A '+<task>' among them names the ids that joined that
-- wake-up while it waited (K.wakeup_more .. <task>, common.lua push_wakeups): leased too
-- (they are of the bucket of the task's event, which queued it: this one).
-- Returns one common.lua lease_one row per delivery (store/deliveries.py LeaseResult.parse).
local out = {}
local function lease(id)
  out[#out + 1] = lease_one(id, now, token, lease_ms, max_in_flight, app_max, now)
end
for i = 6, #ARGV do
  if string.sub(ARGV[i], 1, 1) == '+' then
    local more = K.wakeup_more .. string.sub(ARGV[i], 2)
    for _, id in ipairs(redis.call('LRANGE', more, 0, -1)) do lease(id) end
    redis.call('DEL', more)
  else
    lease(ARGV[i])
  end
end
return out
