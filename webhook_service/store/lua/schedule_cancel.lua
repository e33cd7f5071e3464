#!lua
-- Cancel an event's scheduled deliveries that are not attempted yet (DELETE
-- /v1/events/{id}/schedule): each ends 'failed' with `why` as its error, by the path an
-- application's deletion ends unsent deliveries (common.lua fail_unsent, logged to the
-- outbox), and leaves any line it waited in for a slot. A scheduled delivery is one
-- store/states.py shown_status shows so: pending, no attempt, still due at `sched`. One
-- leased now is left alone: its first attempt is under way.
-- KEYS[1]: K.event .. <msg>, the event's key (store/events.py ScheduleCancelArgs.keys), and
--   so of its bucket: K.delivery .. <dlv>, K.endpoint_seqs, K.endpoint .. <ep>,
--   K.backlog .. <ep>, K.fifo .. <ep>, K.due, K.parked .. <ep>, K.app_parked .. <app>, K.metrics,
--   K.outbox
-- ARGV (store/events.py ScheduleCancelArgs.argv gives them in this order):
local event_id = ARGV[1]
local now = tonumber(ARGV[2])
local sender = ARGV[3]                -- the API key id the event must have been sent with
                                      -- ('' = any, for an admin)
local why = ARGV[4]                   -- the error the cancelled deliveries end with
-- Returns {'cancelled', how many}, {'none'} (no delivery of it is scheduled: none was, or
-- every one is attempted, leased or ended already) or {'missing'} (no such event of that
-- sender's in Redis) (store/events.py CancelOutcome).
local ev = redis.call('HMGET', K.event .. event_id, 'key', 'dlvs')
if not ev[1] or (sender ~= '' and ev[1] ~= sender) then return {'missing'} end

local app = capped_app(event_id)
local cancelled = 0
for _, id in ipairs(event_deliveries(event_id, ev[2])) do
  local key = K.delivery .. id
  local d = redis.call('HMGET', key, 'status', 'attempts', 'next_at', 'sched', 'lease_until',
    'endpoint')
  if d[1] == 'pending' and d[2] == '0' and d[4] and d[3] == d[4]
      and tonumber(d[5] or '0') <= now then
    local ep = delivery_endpoint(id, d[6])
    -- What a finished delivery no longer needs (record.lua keeps nothing dead either).
    redis.call('HDEL', key, 'lease', 'lease_until', 'next_at', 'budget')
    fail_unsent(id, ep, why, now)
    unpark(id, ep, app)
    cancelled = cancelled + 1
  end
end
if cancelled == 0 then return {'none'} end
return {'cancelled', cancelled}
