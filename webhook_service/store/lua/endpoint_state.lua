#!lua
-- An admin enables or disables an endpoint. Enabling forgets the failing streak, so the
-- endpoint gets a whole `disable_after` again; deliveries kept as 'disabled' wait for a
-- recovery, which the admin asks for separately.
-- KEYS[1]: K.endpoint .. <ep>, the endpoint's key (store/endpoints.py
--   EndpointStateArgs.keys), the only one it touches
-- ARGV (store/endpoints.py EndpointStateArgs.argv gives them in this order):
local id = ARGV[1]            -- the endpoint
local disable = ARGV[2]       -- '1': disable (reason 'manual'); '0': enable
local now = tonumber(ARGV[3]) -- ms: its updated (and disabled_at)
-- Returns 1, or 0 when there is no such endpoint. Disabling one disabled already keeps its
-- reason and time.
local key = K.endpoint .. id
if redis.call('EXISTS', key) == 0 then return 0 end
if disable == '1' then
  disable_endpoint(id, 'manual', now)
else
  redis.call('HSET', key, 'disabled', '0', 'updated', now)
  redis.call('HDEL', key, 'disabled_reason', 'disabled_at', 'failing_since')
end
return 1
