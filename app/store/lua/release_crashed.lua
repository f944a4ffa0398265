-- KEYS: queue, expiry, pending, events, players, ticket...
-- ARGV: claim_id, max_crashes, reason, events_maxlen
-- The tickets of a dead-lettered job: those still proposed by the claim (or a takeover of it) and
-- those its runner already put back in the queue. Each counts one more failed job; one at
-- max_crashes ends expired with the reason (one bad ticket cannot stall its pool for ever), the
-- proposed others go back to the queue. Tickets now in another claim, or ended, are left alone.
-- Replies {requeued, expired}.
local prefix = ARGV[1] .. '.'
local limit = tonumber(ARGV[2])
local requeued, expired = 0, 0
for i = 6, #KEYS do
  local k = KEYS[i]
  local f = redis.call('HMGET', k, 'status', 'match_id', 'id')
  local ours = f[1] == 'proposed' and (f[2] == ARGV[1] or string.sub(f[2], 1, #prefix) == prefix)
  if ours or f[1] == 'queued' then
    if redis.call('HINCRBY', k, 'crashes', 1) >= limit then
      expire(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], k, f[3], ARGV[3], ARGV[4])
      expired = expired + 1
    elseif ours then
      requeued = requeued + requeue(KEYS[1], KEYS[2], KEYS[3], k, f[2])
    end
  end
end
return {requeued, expired}
