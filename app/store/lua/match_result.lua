-- KEYS: match hash
-- ARGV: result JSON
-- Keep a match's result unless it has one (the first result stays; the hash keeps its TTL).
-- Returns false for an unknown or expired match, else {1 if stored now else 0, record, time, result, result_at}.
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local stored = 0
if not redis.call('HGET', KEYS[1], 'result') then
  redis.call('HSET', KEYS[1], 'result', ARGV[1], 'result_at', fmt(now_s()))
  stored = 1
end
local f = redis.call('HMGET', KEYS[1], 'record', 'time', 'result', 'result_at')
return {stored, f[1], f[2], f[3], f[4]}
