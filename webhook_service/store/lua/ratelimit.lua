#!lua
-- One GCRA check for a caller outside any other script (store/ratelimit.py).
-- The clock is the server's: every API process then measures against the same time.
-- Keys (none passed as KEYS): K.limit .. <name>
-- ARGV (store/ratelimit.py RateLimitArgs.argv gives them in this order):
local name = ARGV[1]             -- what is limited, e.g. 'apikey:<id>'
local rate = tonumber(ARGV[2])   -- requests per second, on average
local burst = tonumber(ARGV[3])  -- requests at once after an idle spell
-- Returns 0 (go: the request is counted) or the ms to wait (nothing counted).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
return gcra(K.limit .. name, now, rate, burst)
