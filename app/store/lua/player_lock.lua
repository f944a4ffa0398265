-- KEYS: the player's lock (its own slot). ARGV: ticket id, ttl_ms, the holder known to be no longer live ('' = none)
-- Take the player's cross-pool lock for the ticket: when it is free, already this ticket's (a retry), or
-- held by the ticket the caller found ended. Replies '' when taken, else the id of the ticket holding it.
local cur = redis.call('GET', KEYS[1])
if not cur or cur == ARGV[1] or (ARGV[3] ~= '' and cur == ARGV[3]) then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return ''
end
return cur
