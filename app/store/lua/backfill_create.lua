-- KEYS: backfill, open backfills index. ARGV: id, data, ttl_s, retention_s
-- A new open backfill stamped with Redis TIME; replayed (a retry after a lost reply) it changes
-- nothing. Replies '<created> <expires>'.
if redis.call('EXISTS', KEYS[1]) == 1 then
  local f = redis.call('HMGET', KEYS[1], 'created', 'expires')
  return f[1] .. ' ' .. f[2]
end
local now = now_s()
local ttl = tonumber(ARGV[3])
local created, expires = fmt(now), fmt(now + ttl)
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'data', ARGV[2], 'status', 'open', 'created', created, 'expires', expires)
redis.call('PEXPIRE', KEYS[1], math.floor((ttl + tonumber(ARGV[4])) * 1000))
redis.call('ZADD', KEYS[2], expires, ARGV[1])
return created .. ' ' .. expires
