#!lua
-- Create or update an application, atomically with its uid's mapping when that is kept in
-- the application's bucket: two applications never hold one uid, and a uid an update
-- changes or drops is free at once. A uid mapped in another bucket (an update to a uid of
-- another bucket's) is claimed there before and let go of there after, by the caller
-- (store/applications.py ApplicationStore.update), in steps of their own.
-- KEYS[1]: K.app .. <app>, the application's key (store/applications.py AppSaveArgs.keys),
--   whose bucket every other key is of: K.apps, K.apps_uid
-- ARGV (store/applications.py AppSaveArgs.argv gives them in this order):
local mode = ARGV[1]      -- 'create' | 'update'
local id = ARGV[2]        -- the application
local name = ARGV[3]
local uid = ARGV[4]       -- '' = none
local metadata = ARGV[5]  -- a JSON object ('' = {})
local rate = ARGV[6]      -- its ingest limit, events/s ('' = none)
local created = ARGV[7]   -- ms; an update keeps the application's own
local updated = ARGV[8]   -- ms
local uid_here = ARGV[9] == '1'      -- uid maps in this bucket: check it free, map it here
                                     -- (a creation's always does: its id is made there)
local old_uid_here = ARGV[10] == '1' -- update: the uid it had maps here (drop it here)
local portal = ARGV[11]   -- its portal's options, JSON ('' = none: no field)
-- Returns 'created' or 'updated', or, writing nothing, 'uid_taken' (another application
-- holds the uid), 'missing' (an update of no application) or 'exists' (a creation of an
-- id taken) (store/applications.py ApplicationOutcome).
if mode ~= 'create' and mode ~= 'update' then
  return redis.error_reply('app_save: unknown mode ' .. mode)
end
local key = K.app .. id
local old = redis.call('HMGET', key, 'name', 'uid')
if mode == 'create' then
  if old[1] then return 'exists' end
  if uid_here and not uid_free(id, uid) then return 'uid_taken' end
  create_app(id, name, uid, metadata, rate, created, updated, uid_here)
  if portal ~= '' then redis.call('HSET', key, 'portal', portal) end
  return 'created'
end
if not old[1] then return 'missing' end
if uid_here and not uid_free(id, uid) then return 'uid_taken' end
if old_uid_here and old[2] ~= '' and old[2] ~= uid
  and redis.call('HGET', K.apps_uid, old[2]) == id then
  redis.call('HDEL', K.apps_uid, old[2])
end
redis.call('HSET', key, 'name', name, 'uid', uid, 'metadata', metadata, 'rate_limit', rate,
  'updated', updated)
if portal == '' then
  redis.call('HDEL', key, 'portal')
else
  redis.call('HSET', key, 'portal', portal)
end
if uid ~= '' and uid_here then redis.call('HSET', K.apps_uid, uid, id) end
return 'updated'
