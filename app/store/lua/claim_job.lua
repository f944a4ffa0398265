-- KEYS: queue, expiry, pending, jobs stream, ticket... ARGV: match_id, lease_s, job (JSON), id (one per ticket key)...
-- claim.lua and the job's XADD in one step: queued → proposed for every ticket and the job on the
-- solvers' stream, or nothing. A matchmaker killed between a claim and its publish (two calls) left
-- its tickets proposed in a job nobody had, until their lease ran out; this cannot.
-- Replies the job's stream entry id; 0 if a ticket is not free; 'held' when every ticket is already
-- proposed by this match (a retried call after a lost reply: the job was published then, not again).
local now = now_s()
local held = claimable(5, ARGV[1], now)
if held == nil then return 0 end
if held > 0 then
  if held == #KEYS - 4 then return 'held' end
  return 0
end
propose(KEYS[1], KEYS[2], KEYS[3], 5, ARGV[1], now + tonumber(ARGV[2]))
return redis.call('XADD', KEYS[4], '*', 'job', ARGV[3])
