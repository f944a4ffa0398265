-- KEYS: queue, expiry, pending, ticket... ARGV: match_id, lease_s, id (one per ticket key)...
-- queued → proposed for every ticket or for none. A ticket this claim already holds counts as
-- claimed (a retried call after a lost reply claims nothing twice).
local now = now_s()
if claimable(4, ARGV[1], now) == nil then return 0 end
propose(KEYS[1], KEYS[2], KEYS[3], 4, ARGV[1], now + tonumber(ARGV[2]))
return 1
