-- KEYS: the match's applied mark, then one rating hash per player (all in the {ratings} slot).
-- ARGV: mark ttl_ms, then per player: expected version, mu, sigma, games
-- Once per match: 'done' if the mark exists; 'stale' if a player's version moved (nothing written);
-- else every rating written with version + 1 and the mark set: 'applied'. Replayed after it applied, it
-- answers 'done'.
if redis.call('EXISTS', KEYS[1]) == 1 then return 'done' end
for i = 2, #KEYS do
  local v = tonumber(redis.call('HGET', KEYS[i], 'version') or '0')
  if v ~= tonumber(ARGV[2 + (i - 2) * 4]) then return 'stale' end
end
for i = 2, #KEYS do
  local a = 2 + (i - 2) * 4
  redis.call('HSET', KEYS[i], 'mu', ARGV[a + 1], 'sigma', ARGV[a + 2], 'games', ARGV[a + 3],
             'version', tonumber(ARGV[a]) + 1)
end
redis.call('SET', KEYS[1], '1', 'PX', ARGV[1])
return 'applied'
