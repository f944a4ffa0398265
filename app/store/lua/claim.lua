-- KEYS: queue, expiry, pending, ticket... ARGV: match_id, lease_s, id (one per ticket key)...
-- queued → proposed for every ticket or for none. A ticket this claim already holds counts as
-- claimed (a retried call after a lost reply claims nothing twice).
local now = now_s()
local lease = now + tonumber(ARGV[2])
for i = 4, #KEYS do
  local f = redis.call('HMGET', KEYS[i], 'status', 'expires', 'match_id')
  local free = f[1] == 'queued' and tonumber(f[2]) > now
  if not free and not (f[1] == 'proposed' and f[3] == ARGV[1]) then return 0 end
end
for i = 4, #KEYS do
  local tid = ARGV[i - 1]
  redis.call('HSET', KEYS[i], 'status', 'proposed', 'match_id', ARGV[1], 'lease', fmt(lease))
  redis.call('ZREM', KEYS[1], tid)
  redis.call('ZREM', KEYS[2], tid)
  redis.call('ZADD', KEYS[3], lease, tid)
end
return 1
