-- KEYS: queue, expiry, pending, events, players, players scan cursor.
-- ARGV: ticket key prefix, batch, events_maxlen, players slice
-- One reaper round at Redis TIME: queued tickets past their TTL → expired; proposals past their
-- lease → queued; and a slice of the players hash checked, dropping entries whose ticket ended or
-- is gone (an entry is normally freed when its ticket ends; this catches hashes that expired).
-- Replies {expired, released}.
local now = now_s()
local prefix, batch = ARGV[1], tonumber(ARGV[2])
local expired, released = 0, 0
for _, tid in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, batch)) do
  local k = prefix .. tid
  local f = redis.call('HMGET', k, 'status', 'expires')
  if f[1] == 'queued' then
    if tonumber(f[2]) <= now then
      expire(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], k, tid, '', ARGV[3])
      expired = expired + 1
    end
  else
    redis.call('ZREM', KEYS[1], tid)
    redis.call('ZREM', KEYS[2], tid)
  end
end
for _, tid in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, batch)) do
  local k = prefix .. tid
  local f = redis.call('HMGET', k, 'status', 'lease')
  if f[1] ~= 'proposed' then
    redis.call('ZREM', KEYS[3], tid)
  elseif f[2] and f[2] ~= '' and tonumber(f[2]) > now then
    redis.call('ZADD', KEYS[3], f[2], tid)  -- the score lagged behind a renewed lease
  else
    released = released + requeue(KEYS[1], KEYS[2], KEYS[3], k, '')
  end
end
local cursor = redis.call('GET', KEYS[6]) or '0'
local scan = redis.call('HSCAN', KEYS[5], cursor, 'COUNT', ARGV[4])
redis.call('SET', KEYS[6], scan[1], 'EX', 3600)
local entries = scan[2]
for i = 1, #entries, 2 do
  local st = redis.call('HGET', prefix .. entries[i + 1], 'status')
  if st ~= 'queued' and st ~= 'proposed' then
    redis.call('HDEL', KEYS[5], entries[i])
  end
end
return {expired, released}
