-- KEYS: the kind's worker set (ZSET worker id → deadline). ARGV: worker id, ttl_s
-- The worker is alive until Redis TIME + ttl; dead entries are pruned; the set expires with its
-- last worker.
local now = now_s()
local ttl = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('EXPIRE', KEYS[1], math.ceil(ttl * 4))
return 1
