-- Helpers shared by the scripts, once in their library (store/scripts.py), below the key
-- table K (the templates from keys.py), so key names are spelled only in keys.py. Only
-- definitions: the library's top level, run as it loads, sees no global but redis.

-- The server's clock in whole ms, for a step whose caller passes no time of its own.
local function server_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Ids (ids.py): a prefix, '_', 10 Crockford base32 characters of ms, then the rest.
local ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ'
local function id_time(id)
  local at = string.find(id, '_', 1, true)
  local ms = 0
  for i = at + 1, at + 10 do
    ms = ms * 32 + string.find(ALPHABET, string.sub(id, i, i), 1, true) - 1
  end
  return ms
end

-- The end of a delivery id: the endpoint's sequence number, its count of base32 digits
-- then the digits (ids.seq_tail).
local function endpoint_tail(seq)
  local n, digits = tonumber(seq), ''
  repeat
    local d = n % 32
    digits = string.sub(ALPHABET, d + 1, d + 1) .. digits
    n = (n - d) / 32
  until n == 0
  return string.sub(ALPHABET, #digits + 1, #digits + 1) .. digits
end

-- Fields a hash leaves out when its id says them (keys.py, "Derived fields"): an event's
-- and a delivery's created (the time in the id); a delivery's endpoint (its id's tail,
-- after 'dlv_' and 26 characters, which endpoint_seqs maps to it); a delivery's event,
-- when its id starts with the event's body (not a replay's), and then its type too (its
-- event's).
local function delivery_endpoint(id, d_endpoint)
  return d_endpoint or redis.call('HGET', K.endpoint_seqs, string.sub(id, 31))
end
local function delivery_event(id, d_event)
  return d_event or ('msg_' .. string.sub(id, 5, 30))
end
local function delivery_created(id, d_created)
  return tonumber(d_created) or id_time(id)
end

-- An event's dlvs field: its deliveries, comma separated; one whose id starts with the
-- event's body by its tail only (the rest of its id), a replay's by its whole id
-- (ids.event_deliveries). Returns the ids and the entries, in the same order.
local function event_deliveries(event_id, dlvs)
  local head = 'dlv_' .. string.sub(event_id, 5)
  local ids, entries = {}, {}
  for entry in string.gmatch(dlvs or '', '[^,]+') do
    entries[#entries + 1] = entry
    if string.sub(entry, 1, 4) == 'dlv_' then ids[#ids + 1] = entry
    else ids[#ids + 1] = head .. entry end
  end
  return ids, entries
end

-- Deliveries that became final (FINAL, from store/states.py) count in the metrics
-- (store/telemetry.py outcome:{status}); one leaves Redis once the log has it (release.lua).
local function count_outcome(status)
  if FINAL[status] then redis.call('HINCRBY', K.metrics, 'outcome:' .. status, 1) end
end

-- The delivery log's outbox (webhook_service/history/records.py reads it back): every
-- state change appends the record the SQL log needs in the same atomic step, so the log
-- misses nothing that happened and holds nothing that did not. An entry's kind field holds
-- the record as JSON; the bytes it is about (a body, an attempt) ride beside it unescaped.
local function opt_number(v)
  if v then return tonumber(v) end
end

-- A delivery's state after a change, with the attempt that made it, if one did: given
-- the delivery's fields as its hash now holds them (nil or false for one it lacks; record.lua
-- has them at hand), or read from the hash (log_state).
local function log_fields(id, attempt_json, status, attempts, updated, next_at, code, err, class)
  local rec = {d = id, s = status, n = tonumber(attempts), u = tonumber(updated),
    c = opt_number(code), e = err or nil, k = class or nil}
  if status == 'pending' then rec.na = opt_number(next_at) end
  if attempt_json then
    redis.call('XADD', K.outbox, '*', LOG.state, cjson.encode(rec), LOG.attempt, attempt_json)
  else
    redis.call('XADD', K.outbox, '*', LOG.state, cjson.encode(rec))
  end
end
local function log_state(id, attempt_json)
  local d = redis.call('HMGET', K.delivery .. id, 'status', 'attempts', 'updated', 'next_at',
    'code', 'error', 'class')
  log_fields(id, attempt_json, unpack(d, 1, 7))
end

-- New deliveries, as {id, endpoint, status} rows for an event or a replay record.
local function delivery_rows(ids, endpoints, statuses)
  local rows = {}
  for i, id in ipairs(ids) do rows[i] = {id, endpoints[i], statuses[i]} end
  return rows
end

-- Every delivery enters and leaves 'pending' through these two, which keep what counts
-- the endpoint's pending deliveries:
-- * its backlog (GET /v1/endpoints/{id}/stats), counted as deliveries enter and leave: reading
--   it is one GET, and it holds however long ago they were made. Not for an endpoint that is
--   gone (its key went with it).
-- * for an endpoint with ordering 'fifo', its line (K.fifo .. <ep>): its pending deliveries in
--   the order they became pending, each marked fifo = '1'. Only the line's head is due and
--   may be leased (lease_one); the others wait with a due entry FIFO_WAIT_MS on, a fallback
--   only, so that every pending delivery stays in the due set (app_end.lua scans it), and the
--   head that ends hands the line on (pending_out), in the same step. A delivery made while
--   the endpoint was not FIFO is in no line and goes as before.
local FIFO_WAIT_MS = 3600000

-- A delivery now pending, due at due_at unless it waits in its endpoint's line. Returns
-- whether it is due at due_at (false: it waits behind the line's head; no wake-up for it).
local function pending_in(ep, id, due_at, now)
  local e = redis.call('HMGET', K.endpoint .. ep, 'url', 'ordering')
  if e[1] then redis.call('INCRBY', K.backlog .. ep, 1) end
  if e[2] == 'fifo' then
    redis.call('HSET', K.delivery .. id, 'fifo', '1')
    if redis.call('RPUSH', K.fifo .. ep, id) > 1 then
      redis.call('ZADD', K.due, now + FIFO_WAIT_MS, id)
      return false
    end
  end
  redis.call('ZADD', K.due, due_at, id)
  return true
end

-- A delivery no longer pending (it ended). If it headed its endpoint's line, the next one
-- becomes the head, due at its own next_at (a scheduled one's time) or now; it is returned
-- so that the caller may lease it in the same step (record.lua).
-- Whether the endpoint exists and the delivery's fifo field are read here unless the caller
-- has them (record.lua), to spare the reads: ep_exists true or false, fifo '1' or false.
local function pending_out(ep, id, now, ep_exists, fifo)
  if ep_exists == nil then ep_exists = redis.call('EXISTS', K.endpoint .. ep) == 1 end
  if ep_exists then redis.call('INCRBY', K.backlog .. ep, -1) end
  if fifo == nil then fifo = redis.call('HGET', K.delivery .. id, 'fifo') end
  if fifo ~= '1' then return nil end
  redis.call('HDEL', K.delivery .. id, 'fifo')
  local line = K.fifo .. ep
  if redis.call('LINDEX', line, 0) ~= id then
    redis.call('LREM', line, 1, id)
    return nil
  end
  redis.call('LPOP', line)
  local head = redis.call('LINDEX', line, 0)
  if not head then return nil end
  local at = tonumber(redis.call('HGET', K.delivery .. head, 'next_at') or '') or now
  redis.call('ZADD', K.due, math.max(now, at), head)
  return head
end

-- The endpoint's line dissolved (it is deleted, or no longer FIFO): each delivery in it
-- goes as any other, due now; the head keeps its due entry (it may be leased).
local function fifo_release(ep, now)
  local line = K.fifo .. ep
  for i, id in ipairs(redis.call('LRANGE', line, 0, -1)) do
    redis.call('HDEL', K.delivery .. id, 'fifo')
    if i > 1 then redis.call('ZADD', K.due, now, id) end
  end
  redis.call('DEL', line)
end

-- A delivery that ends without an attempt (its endpoint or its payload is gone).
local function fail_unsent(id, ep, why, now)
  redis.call('HSET', K.delivery .. id, 'status', 'failed', 'error', why, 'updated', now)
  count_outcome('failed')
  redis.call('ZREM', K.due, id)
  pending_out(ep, id, now)
  log_state(id)
end

-- Applications (store/applications.py): each uid names one application (K.apps_uid).
-- Whether `uid` ('' = none) is free for the application `app`. The default application's
-- is its own even before it exists, so no tenant takes the name the flat routes act on.
local function uid_free(app, uid)
  if uid == '' then return true end
  if uid == DEFAULT_APP.uid and app ~= DEFAULT_APP.id then return false end
  local holder = redis.call('HGET', K.apps_uid, uid)
  return not holder or holder == app
end

-- A new application, once its uid is found free (uid_free). `uid_here`: its uid's mapping
-- is kept in this bucket (keys.uid_bucket), as it is for every application created with
-- its uid (store/applications.py new_app_id); false when the caller keeps it elsewhere.
local function create_app(app, name, uid, metadata, rate, created, updated, uid_here)
  redis.call('HSET', K.app .. app, 'name', name, 'uid', uid, 'metadata', metadata,
    'rate_limit', rate, 'created', created, 'updated', updated)
  redis.call('ZADD', K.apps, 0, app)
  if uid ~= '' and uid_here then redis.call('HSET', K.apps_uid, uid, app) end
end

-- An endpoint's subscriptions, within its application: event_types '' means every type,
-- otherwise a JSON list.
local function subscription_keys(app, types_json)
  if types_json == nil or types_json == false or types_json == '' then
    return {K.sub_all .. app}
  end
  local keys = {}
  for i, t in ipairs(cjson.decode(types_json)) do
    keys[i] = K.sub_type .. app .. K.sub_type_infix .. t
  end
  return keys
end

local function unsubscribe(app, id, types_json)
  for _, k in ipairs(subscription_keys(app, types_json)) do redis.call('SREM', k, id) end
end

local function subscribe(app, id, types_json)
  for _, k in ipairs(subscription_keys(app, types_json)) do redis.call('SADD', k, id) end
end

-- The application's endpoints that take an event of this type.
local function subscribers(app, etype)
  return redis.call('SUNION', K.sub_type .. app .. K.sub_type_infix .. etype, K.sub_all .. app)
end

-- An event's channels (a list) as the set create_delivery filters with; nil (our
-- operational events, which go to sub_ops by their own flag) filters nothing.
local function channel_filter(channels)
  if channels == nil then return nil end
  local set = {}
  for _, c in ipairs(channels) do set[c] = true end
  return set
end

-- Whether an endpoint (its channels field: '' none, else a JSON list) takes an event: one
-- without channels takes every event of its types, one with channels only an event that
-- shares one of them, so an event without channels reaches only endpoints without.
local function takes(wanted, ep_channels)
  if wanted == nil or not ep_channels or ep_channels == '' then return true end
  for _, c in ipairs(cjson.decode(ep_channels)) do
    if wanted[c] then return true end
  end
  return false
end

-- One delivery of an event to an endpoint; returns its id, its status and whether it wants a
-- wake-up now (pending, not scheduled, not waiting in its endpoint's FIFO line), or nil
-- when the endpoint's channels leave the event out (takes: `wanted` is channel_filter's).
-- The id is 'dlv_', part (the event's id body, or a replay's own, 26 characters), then
-- the endpoint's tail: ids.delivery_id. `at` (ms, nil = now): a scheduled delivery, due
-- then and not before; it stays 'pending' for every script and keeps `sched` (its time)
-- beside next_at, so readers show it 'scheduled' until its first attempt (store/states.py
-- shown_status), and so does the status this returns for the log record.
local function create_delivery(now, part, event_id, ep, etype, budget, due_at, wanted, at)
  local e = redis.call('HMGET', K.endpoint .. ep, 'disabled', 'seq', 'channels')
  if not takes(wanted, e[3]) then return nil end
  local id = 'dlv_' .. part .. endpoint_tail(e[2])
  local status = 'pending'
  if e[1] == '1' then status = 'disabled' end
  if status ~= 'pending' then at = nil end  -- held for its endpoint: recover sends it
  local fields = {'status', status, 'attempts', 0, 'budget', budget, 'next_at', at or now,
    'updated', now}
  if at then
    table.insert(fields, 'sched')
    table.insert(fields, at)
  end
  if event_id ~= 'msg_' .. part then
    table.insert(fields, 'event')
    table.insert(fields, event_id)
    table.insert(fields, 'type')
    table.insert(fields, etype)
  end
  if now ~= id_time(id) then
    table.insert(fields, 'created')
    table.insert(fields, now)
  end
  redis.call('HSET', K.delivery .. id, unpack(fields))
  count_outcome(status)
  local due = status == 'pending' and pending_in(ep, id, at or due_at, now)
  if at then return id, 'scheduled', false end
  return id, status, due
end

-- Write one event and one delivery per endpoint that takes it, and their log record.
-- ev: {id, type, body, key (the producer's API key id), idem (its idempotency key, '' for
-- none), app (its application, '' for our operational events), channels (a list; nil for
-- our operational events and examples: no filter), example (true: an example sent to one
-- endpoint, so marked in the event and its log record), at (its deliver_at, ms; nil =
-- none: kept in the event and its log record, and its deliveries scheduled for then when
-- that is later than now)}.
-- A disabled endpoint's delivery is kept in status 'disabled' (recover re-sends it later);
-- the others are due at due_at, the safety net that re-wakes them if the API's wake-up is
-- lost, or, scheduled, at their time (the scheduler's claim wakes them: no wake-up now).
-- Returns every delivery id and the pending ones that want a wake-up now.
local function create_event(now, ev, endpoints, budget, due_at)
  local event_part = string.sub(ev.id, 5)
  local wanted = channel_filter(ev.channels)
  local at = nil
  if ev.at and ev.at > now then at = ev.at end
  local ids, pending, tails, reached, statuses = {}, {}, {}, {}, {}
  for _, ep in ipairs(endpoints) do
    local id, status, wake = create_delivery(now, event_part, ev.id, ep, ev.type, budget,
      due_at, wanted, at)
    if id then
      ids[#ids + 1] = id
      tails[#tails + 1] = string.sub(id, 31)
      reached[#reached + 1] = ep
      statuses[#statuses + 1] = status
      if wake then pending[#pending + 1] = id end
    end
  end
  local rec = {id = ev.id, type = ev.type, t = now, key = ev.key, app = ev.app,
    dlv = delivery_rows(ids, reached, statuses)}
  if ev.idem ~= '' then rec.idem = ev.idem end
  if ev.channels and #ev.channels > 0 then rec.ch = ev.channels end
  if ev.example then rec.ex = true end
  if ev.at then rec.at = ev.at end
  redis.call('XADD', K.outbox, '*', LOG.event, cjson.encode(rec), LOG.body, ev.body)
  redis.call('HSET', K.event .. ev.id, 'type', ev.type, 'body', ev.body, 'key', ev.key, 'app',
    ev.app, 'dlvs', table.concat(tails, ','), 'live', #ids)
  if ev.example then redis.call('HSET', K.event .. ev.id, 'example', '1') end
  if ev.at then redis.call('HSET', K.event .. ev.id, 'at', ev.at) end
  if now ~= id_time(ev.id) then redis.call('HSET', K.event .. ev.id, 'created', now) end
  return ids, pending
end

-- Celery wake-ups for these deliveries, from the template the API built (workers/wakeup.py:
-- #TASK# is the task id, #IDS# the comma list; ids are [0-9A-Za-z_], so gsub's '%' escapes
-- cannot appear in them). While workers keep up the queue is empty, and each event gets a
-- message of its own at once. When they fall behind, messages wait in the list, and a new
-- event's ids join the newest waiting message (up to `batch` ids) rather than adding one:
-- a backlog is drained in batches, as a coalescing publisher would drain it, without a
-- wake-up ever being held back. The newest message is the list's head (LPUSH; consumers
-- BRPOP the tail), and it is still waiting while it holds the task id we noted. Joining
-- appends the ids to the message's side list (K.wakeup_more), named by the message's last
-- id, '+' and its task id: the lease that takes the message takes them (lease.lua). Every
-- write goes to the AOF, and rewriting the whole message for each event that joins cost
-- more than the event itself.
local function fill_wakeup(template, task, ids)
  return (string.gsub(string.gsub(template, '#TASK#', task), '#IDS#', ids .. ',+' .. task))
end

local function push_wakeups(queue, template, batch, task_prefix, ids)
  local noted = K.wakeup .. queue
  local first = 1
  local last = redis.call('HMGET', noted, 'task', 'count')
  local head = last[1] and redis.call('LINDEX', queue, 0)
  if head and string.find(head, last[1], 1, true) then
    local take = math.min(batch - tonumber(last[2]), #ids)
    if take > 0 then
      local more = K.wakeup_more .. last[1]
      if redis.call('RPUSH', more, unpack(ids, 1, take)) == take then
        redis.call('EXPIRE', more, TTL.wakeup_more)
      end
      redis.call('HINCRBY', noted, 'count', take)
      first = take + 1
    end
  end
  for start = first, #ids, batch do
    local stop = math.min(#ids, start + batch - 1)
    local task = task_prefix .. '.' .. start
    redis.call('LPUSH', queue, fill_wakeup(template, task, table.concat(ids, ',', start, stop)))
    redis.call('HSET', noted, 'task', task, 'count', stop - start + 1)
  end
end

-- An operational event about our own health (endpoint.disabled, ...): stored like any
-- event and delivered to the operations endpoints, due at once. It belongs to no
-- application: only the operator sees it. Its keys are the default application's bucket's,
-- where the operations endpoints are: made at once by a step of that bucket; a step of
-- another bucket asks for it in its own (K.ops_requests), and the shipper's next pass makes
-- it there (lua/ops_emit.lua, store/ops.py), once, under the id chosen here. ctx carries the
-- ids (of that bucket) and timestamp the caller prepared, since Lua can make neither.
local function make_ops_event(now, event_id, etype, body, budget)
  create_event(now, {id = event_id, type = etype, body = body, key = 'system', idem = '',
    app = ''}, redis.call('SMEMBERS', K.sub_ops), budget, now)
end

local function emit_ops(ctx, etype, data)
  local event_id = table.remove(ctx.ids, 1)
  local body = cjson.encode({type = etype, timestamp = ctx.iso, data = data})
  if in_default_bucket() then
    make_ops_event(ctx.now, event_id, etype, body, ctx.budget)
  else
    redis.call('RPUSH', K.ops_requests, cjson.encode({id = event_id, type = etype,
      body = body, t = ctx.now, budget = ctx.budget}))
  end
  return event_id
end

-- Stop delivering to an endpoint; its pending deliveries turn 'disabled' when next leased.
-- Returns false when it was disabled already.
local function disable_endpoint(ep, reason, now)
  local key = K.endpoint .. ep
  local state = redis.call('HMGET', key, 'url', 'disabled')
  if not state[1] or state[2] == '1' then return false end
  redis.call('HSET', key, 'disabled', '1', 'disabled_reason', reason, 'disabled_at', now,
    'updated', now)
  return true
end

-- Generic cell rate algorithm: on average one request per 1/rate s, bursts of `burst`.
-- Counts the request and returns 0 when it may go now, otherwise the ms to wait.
local function gcra(key, now, rate, burst)
  local interval = 1000 / rate
  local tat = tonumber(redis.call('GET', key) or '0')
  if tat < now then tat = now end
  local wait = tat - now - interval * (burst - 1)
  if wait > 0 then return math.ceil(wait) end
  local next_tat = tat + interval
  redis.call('SET', key, string.format('%.3f', next_tat), 'PX',
    math.ceil(next_tat - now + interval * burst))
  return 0
end

-- Per-application cap on sends in flight (WEBHOOK_APP_CONCURRENCY), beside each endpoint's:
-- a tenant whose endpoints all hang holds at most app_max of every worker's slots. It
-- counts by the event's application, read here: the one whose cap a delivery of this event
-- counts against, or '' for none. Our operational events belong to no application (and go
-- to the operator's endpoints); the default application is where a single-tenant
-- deployment keeps every endpoint, whose hanging ones must not hold the others' sends back
-- (the endpoint's own cap keeps them apart, as before applications).
local function capped(app)
  if not app or app == DEFAULT_APP.id then return '' end
  return app
end
local function capped_app(event_id)
  return capped(redis.call('HGET', K.event .. event_id, 'app'))
end

-- Whether the application holds app_max leases already. Expired ones are dropped first: a
-- worker that died mid-send holds no slot past its lease.
local function app_full(app, app_max, now)
  if app == '' or app_max <= 0 then return false end
  local inflight = K.app_inflight .. app
  redis.call('ZREMRANGEBYSCORE', inflight, '-inf', now)
  return redis.call('ZCARD', inflight) >= app_max
end

-- A delivery that no longer waits for a slot (leased, or ended), in neither line.
local function unpark(id, ep_id, app)
  redis.call('ZREM', K.parked .. ep_id, id)
  if app ~= '' then redis.call('ZREM', K.app_parked .. app, id) end
end

-- Wait for a slot: the send that frees one wakes the longest-waiting delivery (record.lua).
-- The due entry is only the fallback, should no slot free in a whole lease.
local function park(line, id, since, now, lease_ms)
  redis.call('ZADD', line, 'NX', since, id)
  redis.call('ZADD', K.due, now + lease_ms, id)
end

-- Take a lease on one delivery, or say why not: {id, why} or, leased, {id, 'go', attempts,
-- event, endpoint, body, url, secrets, headers, retry_schedule, timeout (the endpoint's
-- policy, '' for the global one), fifo ('1': the head of its endpoint's FIFO line, else ''),
-- traceparent (the producer's, kept with the event; '' for none), send_tp ('1': the endpoint
-- asks for an outbound traceparent header, else '')}. lease.lua takes a
-- wake-up's batch with it; record.lua the parked deliveries that the slots its attempt freed
-- go to, and a FIFO line's next head. At most max_in_flight
-- leases per endpoint and app_max per application (0: no cap); one that
-- finds either full parks in that one's line, scored `since` (when it began to wait: now,
-- or the score it had in the line record.lua took it from, so it keeps its place).
local function lease_one(id, now, token, lease_ms, max_in_flight, app_max, since)
  local key = K.delivery .. id
  local d = redis.call('HMGET', key, 'status', 'attempts', 'next_at', 'lease_until', 'event',
    'endpoint', 'updated', 'fifo')
  -- A wake-up a little ahead of the delivery's time (another host's clock) still sends it:
  -- a second for one due at once (a first attempt: nothing to wait for, and a worker whose
  -- clock runs behind the API's must not leave it to the scheduler), else a tenth of the
  -- delay record.lua set (next_at - updated), at most a second: a fixed second would let
  -- a repeated wake-up send a retry scheduled 1 s on at once.
  local delay = tonumber(d[3] or '0') - tonumber(d[7] or '0')
  local ahead = delay <= 0 and 1000 or math.min(1000, delay / 10)
  if not d[1] then
    redis.call('ZREM', K.due, id)
    return {id, 'gone'}
  elseif d[1] ~= 'pending' then
    redis.call('ZREM', K.due, id)
    return {id, 'done'}
  elseif tonumber(d[4] or '0') > now then
    return {id, 'leased'}
  elseif d[8] == '1'
      and redis.call('LINDEX', K.fifo .. delivery_endpoint(id, d[6]), 0) ~= id then
    -- Behind its FIFO line's head (a wake-up sent before it joined, or a retry's): the head
    -- that ends makes it due (pending_out).
    redis.call('ZADD', K.due, now + FIFO_WAIT_MS, id)
    return {id, 'queued'}
  elseif tonumber(d[3]) > now + ahead then
    -- A stale wake-up for a retry that is not due yet: the due entry will wake it.
    return {id, 'early'}
  else
    local ep_id, event_id = delivery_endpoint(id, d[6]), delivery_event(id, d[5])
    local ep = redis.call('HMGET', K.endpoint .. ep_id, 'url', 'secrets', 'disabled',
      'rate_limit', 'headers', 'retry_schedule', 'timeout', 'send_tp')
    local app = capped_app(event_id)
    local inflight = K.inflight .. ep_id
    if ep[1] then redis.call('ZREMRANGEBYSCORE', inflight, '-inf', now) end
    local rate = tonumber(ep[4] or '') or 0
    if not ep[1] then
      fail_unsent(id, ep_id, 'endpoint_deleted', now)
      unpark(id, ep_id, app)
      return {id, 'failed'}
    elseif redis.call('HEXISTS', K.event .. event_id, 'body') == 0 then
      -- An admin expunged the payload: there is nothing left to send.
      fail_unsent(id, ep_id, 'payload_deleted', now)
      unpark(id, ep_id, app)
      return {id, 'failed'}
    elseif ep[3] == '1' then
      -- Its whole FIFO line with it, at once, rather than one head a scheduler pass: none of
      -- them may go before this one does, and all of them wait for a recovery now.
      local line = {id}
      if d[8] == '1' then line = redis.call('LRANGE', K.fifo .. ep_id, 0, -1) end
      for _, held in ipairs(line) do
        redis.call('HSET', K.delivery .. held, 'status', 'disabled', 'updated', now)
        count_outcome('disabled')
        redis.call('ZREM', K.due, held)
        pending_out(ep_id, held, now)
        unpark(held, ep_id, app)
        log_state(held)
      end
      return {id, 'disabled'}
    elseif redis.call('ZCARD', inflight) >= max_in_flight then
      park(K.parked .. ep_id, id, since, now, lease_ms)
      return {id, 'busy'}
    elseif app_full(app, app_max, now) then
      park(K.app_parked .. app, id, since, now, lease_ms)
      return {id, 'app_busy'}
    else
      local wait = 0
      if rate > 0 then wait = gcra(K.rate .. ep_id, now, rate, math.max(1, math.floor(rate))) end
      if wait > 0 then
        redis.call('ZADD', K.due, now + wait, id)
        return {id, 'throttled'}
      else
        local ev = redis.call('HMGET', K.event .. event_id, 'body', 'tp')
        -- An endpoint's own request timeout adds to the lease, which covers the global
        -- one's: a send may not outlast its lease (store/deliveries.py Job.lease_ms).
        local until_ms = now + lease_ms + math.floor(1000 * (tonumber(ep[7] or '') or 0))
        redis.call('HSET', key, 'lease', token, 'lease_until', until_ms)
        redis.call('ZADD', K.due, until_ms, id)
        redis.call('ZADD', inflight, until_ms, id)
        if app ~= '' and app_max > 0 then
          redis.call('ZADD', K.app_inflight .. app, until_ms, id)
        end
        unpark(id, ep_id, app)
        return {id, 'go', d[2], event_id, ep_id, ev[1] or '', ep[1], ep[2], ep[5] or '',
          ep[6] or '', ep[7] or '', d[8] or '', ev[2] or '', ep[8] or ''}
      end
    end
  end
end
