#!lua
-- One GCRA check for a caller outside any other script (store/ratelimit.py).
-- The clock is the server's: every API process then measures against the same time.
-- KEYS[1]: the limiter's own key (keys.limit, e.g. for 'apikey:<id>'; store/ratelimit.py
--   RateLimitArgs.keys), of no bucket: the only key it touches
-- ARGV (store/ratelimit.py RateLimitArgs.argv gives them in this order):
local rate = tonumber(ARGV[1])   -- requests per second, on average
local burst = tonumber(ARGV[2])  -- requests at once after an idle spell
-- Returns 0 (go: the request is counted) or the ms to wait (nothing counted).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
return gcra(KEYS[1], now, rate, burst)
