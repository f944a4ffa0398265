-- KEYS: queue, expiry, pending, events, players, ticket. ARGV: events_maxlen
-- queued/proposed → cancelled (players freed). Replies 'ok', '' (no such ticket) or the status
-- that cannot be cancelled ('expired' for a queued ticket past its TTL).
local f = redis.call('HMGET', KEYS[6], 'status', 'id', 'expires')
if not f[1] then return '' end
if f[1] == 'queued' and tonumber(f[3]) <= now_s() then return 'expired' end
if f[1] ~= 'queued' and f[1] ~= 'proposed' then return f[1] end
redis.call('HSET', KEYS[6], 'status', 'cancelled', 'lease', '')
redis.call('ZREM', KEYS[1], f[2])
redis.call('ZREM', KEYS[2], f[2])
redis.call('ZREM', KEYS[3], f[2])
free_players(KEYS[5], KEYS[6], f[2])
redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[1], '*', 'event', 'cancelled', 'ticket', f[2])
return 'ok'
