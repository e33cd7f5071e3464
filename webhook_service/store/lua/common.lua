-- Helpers shared by every script; scripts.py prepends `local K = {...}` (the key templates
-- from keys.py) and this file to each script, so key names are spelled only in keys.py.

local function move_status(id, old, new)
  if old == new then return end
  if old then redis.call('ZREM', K.dlv_by_status .. old, id) end
  redis.call('ZADD', K.dlv_by_status .. new, 0, id)
end

-- An endpoint's event_types field: '' means every type, otherwise a JSON list.
local function subscription_keys(types_json)
  if types_json == nil or types_json == false or types_json == '' then
    return {K.sub_all}
  end
  local keys = {}
  for i, t in ipairs(cjson.decode(types_json)) do keys[i] = K.sub_type .. t end
  return keys
end

local function unsubscribe(id, types_json)
  for _, k in ipairs(subscription_keys(types_json)) do redis.call('SREM', k, id) end
end

local function subscribe(id, types_json)
  for _, k in ipairs(subscription_keys(types_json)) do redis.call('SADD', k, id) end
end
