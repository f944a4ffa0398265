-- KEYS: backfill, open backfills index. open → cancelled. Replies 'ok', '' (no such backfill) or
-- the status that cannot be cancelled ('expired' for an open one past its TTL).
local f = redis.call('HMGET', KEYS[1], 'status', 'id', 'expires')
if not f[1] then return '' end
if f[1] == 'open' and tonumber(f[3]) <= now_s() then return 'expired' end
if f[1] ~= 'open' then return f[1] end
redis.call('HSET', KEYS[1], 'status', 'cancelled')
redis.call('ZREM', KEYS[2], f[2])
return 'ok'
