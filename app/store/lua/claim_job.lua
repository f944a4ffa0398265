-- KEYS: queue, expiry, pending, jobs stream, ticket... ARGV: match_id, lease_s, job (JSON), id (one per ticket key)...
-- claim.lua and the job's XADD in one step: queued → proposed for every ticket and the job on the
-- solvers' stream, or nothing. A matchmaker killed between a claim and its publish (two calls) left
-- its tickets proposed in a job nobody had, until their lease ran out; this cannot.
-- Replies the job's stream entry id; 0 if a ticket is not free; 'held' when every ticket is already
-- proposed by this match (a retried call after a lost reply: the job was published then, not again).
local now = now_s()
local lease = now + tonumber(ARGV[2])
local held = 0
for i = 5, #KEYS do
  local f = redis.call('HMGET', KEYS[i], 'status', 'expires', 'match_id')
  if f[1] == 'proposed' and f[3] == ARGV[1] then
    held = held + 1
  elseif not (f[1] == 'queued' and tonumber(f[2]) > now) then
    return 0
  end
end
if held > 0 then
  if held == #KEYS - 4 then return 'held' end
  return 0
end
for i = 5, #KEYS do
  local tid = ARGV[i - 1]
  redis.call('HSET', KEYS[i], 'status', 'proposed', 'match_id', ARGV[1], 'lease', fmt(lease))
  redis.call('ZREM', KEYS[1], tid)
  redis.call('ZREM', KEYS[2], tid)
  redis.call('ZADD', KEYS[3], lease, tid)
end
return redis.call('XADD', KEYS[4], '*', 'job', ARGV[3])
