-- KEYS: open backfills index. ARGV: backfill key prefix, batch
-- Open backfills past their TTL (Redis TIME) → expired; ids whose backfill ended or is gone leave
-- the index. Replies how many expired.
local now = now_s()
local n = 0
for _, bid in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))) do
  local k = ARGV[1] .. bid
  local f = redis.call('HMGET', k, 'status', 'expires')
  if f[1] == 'open' and tonumber(f[2]) <= now then
    redis.call('HSET', k, 'status', 'expired')
    n = n + 1
  end
  redis.call('ZREM', KEYS[1], bid)
end
return n
