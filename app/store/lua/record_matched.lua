-- KEYS: throughput. ARGV: players, window_s
-- One committed match in the pool's throughput record: players per whole second of Redis TIME. Once
-- the hash holds more seconds than the window, the older ones go; the key expires after two windows
-- without a match.
local now = now_s()
local window = tonumber(ARGV[2])
redis.call('HINCRBY', KEYS[1], tostring(math.floor(now)), tonumber(ARGV[1]))
if redis.call('HLEN', KEYS[1]) > window + 2 then
  for _, s in ipairs(redis.call('HKEYS', KEYS[1])) do
    if tonumber(s) + 1 < now - window then redis.call('HDEL', KEYS[1], s) end
  end
end
redis.call('PEXPIRE', KEYS[1], math.floor(2 * window * 1000))
return 1
