-- KEYS: the player's lock. ARGV: ticket id
-- Drop the lock only while it names this ticket (a create that did not happen gives its locks back).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
