#!lua
-- One GCRA check for a caller outside any other script (store/ratelimit.py).
-- The clock is the server's: every API process then measures against the same time.
-- ARGV: name, rate per second, burst. Returns 0 (go) or the ms to wait.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
return gcra(K.limit .. ARGV[1], now, tonumber(ARGV[2]), tonumber(ARGV[3]))
