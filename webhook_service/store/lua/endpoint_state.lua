#!lua
-- An admin enables or disables an endpoint. Enabling forgets the failing streak, so the
-- endpoint gets a whole `disable_after` again; deliveries kept as 'disabled' wait for a
-- recovery, which the admin asks for separately.
-- ARGV: id, '1' (disable) | '0' (enable), now_ms
local id, disable, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
local key = K.endpoint .. id
if redis.call('EXISTS', key) == 0 then return 0 end
if disable == '1' then
  disable_endpoint(id, 'manual', now)
else
  redis.call('HSET', key, 'disabled', '0', 'updated', now)
  redis.call('HDEL', key, 'disabled_reason', 'disabled_at', 'failing_since')
end
return 1
