-- KEYS: queue, expiry, pending, ticket... ARGV: match_id
-- proposed (by this match) → queued; returns how many moved.
local moved = 0
for i = 4, #KEYS do
  moved = moved + requeue(KEYS[1], KEYS[2], KEYS[3], KEYS[i], ARGV[1])
end
return moved
