-- KEYS: throughput. ARGV: players, token (unique per match), window_s
-- One committed match in the pool's throughput record at Redis TIME; entries older than the window
-- go, and the key itself expires after two windows without a match.
local now = now_s()
local window = tonumber(ARGV[3])
redis.call('ZADD', KEYS[1], fmt(now), ARGV[1] .. ':' .. ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. fmt(now - window))
redis.call('PEXPIRE', KEYS[1], math.floor(2 * window * 1000))
return 1
