-- Create or update an endpoint and its subscriptions together.
-- ARGV: id, field/value pairs... (must include event_types and disabled)
local id = ARGV[1]
local key = K.endpoint .. id
local old = redis.call('HMGET', key, 'event_types', 'disabled')
if old[2] then unsubscribe(id, old[1]) end
local fields = {}
for i = 2, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', key, unpack(fields))
local now = redis.call('HMGET', key, 'event_types', 'disabled')
if now[2] ~= '1' then subscribe(id, now[1]) end
redis.call('ZADD', K.endpoints, 0, id)
return 1
