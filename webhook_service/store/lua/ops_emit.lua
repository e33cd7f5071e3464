#!lua flags=allow-oom
-- Make the operational events steps of other buckets asked for (common.lua emit_ops put
-- each request in its own bucket's K.ops_requests; store/ops.py hands them here, then drops
-- them there): each stored and delivered to the operations endpoints, as if made at once.
-- A request handed over twice (the shipper died before dropping it, or two ran) makes its
-- event once: K.ops_made .. <msg> notes it. allow-oom: at maxmemory the record steps that
-- asked still run, and so does this, which carries their work to its end.
-- KEYS[1]: K.sub_ops, of the default application's bucket (where the operations endpoints
--   are: store/ops.py OpsEmitArgs.keys), whose keys every new event's are: K.event .. <msg>,
--   K.delivery .. <dlv>, K.endpoint .. <ep>, K.endpoint_seqs, K.backlog .. <ep>, K.fifo .. <ep>,
--   K.due,
--   K.metrics, K.outbox, K.ops_made .. <msg>
-- ARGV (store/ops.py OpsEmitArgs.argv gives them in this order):
-- ARGV[1...]: the requests, each JSON {id (of this bucket), type, body, t (ms it was asked
--   for: the event's time), budget (attempts its deliveries get)}
-- Returns per request, in order, 'made' | 'made_before' (store/ops.py OpsEmitted).
if not in_default_bucket() then
  return redis.error_reply('ops_emit: operational events belong in the default bucket')
end
local out = {}
for i = 1, #ARGV do
  local req = cjson.decode(ARGV[i])
  local made = K.ops_made .. req.id
  if redis.call('EXISTS', made) == 1 then
    out[i] = 'made_before'
  else
    make_ops_event(tonumber(req.t), req.id, req.type, req.body, tonumber(req.budget))
    redis.call('SET', made, '1', 'EX', TTL.ops_made)
    out[i] = 'made'
  end
end
return out
