-- KEYS: queue, expiry, pending, events, players, selected..., unselected...[, match hash, match index]
-- ARGV: match_id, n_selected, result (one per selected)..., events_maxlen
--       [, record JSON, retention_s, max_count, record's match id, match hash key prefix]
-- With the optional tail, the match's record is kept (hash with a TTL, indexed by Redis TIME) and the
-- pool's index is trimmed by age and to max_count entries (the trimmed records' hashes deleted).
-- selected → matched (players freed), unselected → queued, all or nothing; on conflict every ticket
-- still proposed by this match goes back to the queue. Replayed after it applied (a retry), it
-- answers 1 again and changes nothing.
local n = tonumber(ARGV[2])
local rec = #ARGV > 3 + n
local total = #KEYS - 5 - (rec and 2 or 0)
local ok, done = true, 0
for i = 1, n do
  local f = redis.call('HMGET', KEYS[5 + i], 'status', 'match_id')
  if f[2] ~= ARGV[1] then
    ok = false
  elseif f[1] == 'matched' then
    done = done + 1
  elseif f[1] ~= 'proposed' then
    ok = false
  end
end
if ok and n > 0 and done == n then return 1 end
if not ok or done > 0 then
  for i = 1, total do requeue(KEYS[1], KEYS[2], KEYS[3], KEYS[5 + i], ARGV[1]) end
  return 0
end
for i = 1, n do
  local k = KEYS[5 + i]
  local tid = redis.call('HGET', k, 'id')
  redis.call('HSET', k, 'status', 'matched', 'lease', '', 'result', ARGV[2 + i])
  redis.call('ZREM', KEYS[3], tid)
  free_players(KEYS[5], k, tid)
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[3 + n], '*', 'event', 'matched', 'ticket', tid,
             'match_id', ARGV[1])
end
for i = n + 1, total do requeue(KEYS[1], KEYS[2], KEYS[3], KEYS[5 + i], ARGV[1]) end
if rec then
  local mkey, index = KEYS[#KEYS - 1], KEYS[#KEYS]
  local retention, max_count, mid = tonumber(ARGV[5 + n]), tonumber(ARGV[6 + n]), ARGV[7 + n]
  local now = now_s()
  redis.call('DEL', mkey)
  redis.call('HSET', mkey, 'record', ARGV[4 + n], 'time', fmt(now))
  redis.call('PEXPIRE', mkey, math.max(1, math.floor(retention * 1000)))
  redis.call('ZADD', index, fmt(now), mid)
  redis.call('ZREMRANGEBYSCORE', index, '-inf', '(' .. fmt(now - retention))
  local extra = redis.call('ZCARD', index) - max_count
  if extra > 0 then
    for _, old in ipairs(redis.call('ZRANGE', index, 0, extra - 1)) do
      redis.call('DEL', ARGV[8 + n] .. old)
    end
    redis.call('ZREMRANGEBYRANK', index, 0, extra - 1)
  end
end
return 1
