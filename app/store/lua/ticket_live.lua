-- KEYS: ticket, its void marker (the ticket's pool slot). ARGV: marker ttl_ms
-- Whether the ticket named by a player's lock is still live: 1 when queued (unexpired) or proposed, else 0.
-- A ticket whose hash does not exist is voided first (its create, if it still runs, refuses), so the
-- answer 0 stays true: the caller may take the lock over.
local f = redis.call('HMGET', KEYS[1], 'status', 'expires')
if not f[1] then
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[1])
  return 0
end
if f[1] == 'proposed' or (f[1] == 'queued' and tonumber(f[2]) > now_s()) then return 1 end
return 0
