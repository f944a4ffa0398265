-- KEYS: queue, expiry, pending, events, check hash, checks index, ticket...
-- ARGV: claim_id, match_id, timeout_s, events_maxlen, record JSON ('' = none), owners JSON, players JSON
--       (player id → ticket id), tickets JSON, keep_s (how long the ended check stays readable), result JSON
--       per ticket...
-- Tickets proposed by the claim → in the ready check of match_id until Redis TIME + timeout_s, all or none
-- (0, and every ticket the claim still holds back in the queue). Replayed after it applied: 1 again.
if redis.call('EXISTS', KEYS[5]) == 1 then return 1 end
local n = #KEYS - 6
for i = 1, n do
  local f = redis.call('HMGET', KEYS[6 + i], 'status', 'match_id')
  if f[1] ~= 'proposed' or f[2] ~= ARGV[1] then
    for j = 1, n do requeue(KEYS[1], KEYS[2], KEYS[3], KEYS[6 + j], ARGV[1]) end
    return 0
  end
end
local deadline = now_s() + tonumber(ARGV[3])
for i = 1, n do
  local k = KEYS[6 + i]
  local tid = redis.call('HGET', k, 'id')
  local res = cjson.decode(ARGV[9 + i])
  res['accept_deadline'] = deadline
  redis.call('HSET', k, 'match_id', ARGV[2], 'lease', fmt(deadline), 'result', cjson.encode(res))
  redis.call('ZREM', KEYS[3], tid)
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[4], '*', 'event', 'proposed', 'ticket', tid, 'match_id', ARGV[2])
end
redis.call('HSET', KEYS[5], 'status', 'pending', 'deadline', fmt(deadline), 'record', ARGV[5], 'owners', ARGV[6],
           'players', ARGV[7], 'tickets', ARGV[8], 'accepted', 0)
redis.call('PEXPIRE', KEYS[5], math.floor((tonumber(ARGV[3]) + tonumber(ARGV[9])) * 1000))
redis.call('ZADD', KEYS[6], deadline, ARGV[2])
return 1
