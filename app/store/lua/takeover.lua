-- KEYS: queue, expiry, pending, ticket... ARGV: claim_id, new_id, lease_s
-- Fencing: tickets proposed by the claim, or by an earlier takeover of it ('<claim_id>.<token>'), are
-- re-stamped with the new id and a fresh lease; a runner still holding an older id can neither
-- commit nor release them.
local lease = now_s() + tonumber(ARGV[3])
local n = 0
local prefix = ARGV[1] .. '.'
for i = 4, #KEYS do
  local f = redis.call('HMGET', KEYS[i], 'status', 'match_id', 'id')
  if f[1] == 'proposed' and (f[2] == ARGV[1] or string.sub(f[2], 1, #prefix) == prefix) then
    redis.call('HSET', KEYS[i], 'match_id', ARGV[2], 'lease', fmt(lease))
    redis.call('ZADD', KEYS[3], lease, f[3])
    n = n + 1
  end
end
return n
