-- KEYS: queue, expiry, pending, events, players, ticket. ARGV: claim_id, reason, events_maxlen
-- proposed (by this claim) → expired with a reason; 1 if it moved, 0 if the claim does not hold it.
local f = redis.call('HMGET', KEYS[6], 'status', 'match_id', 'id')
if f[1] ~= 'proposed' or f[2] ~= ARGV[1] then return 0 end
expire(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], f[3], ARGV[2], ARGV[3])
return 1
