-- KEYS: idem, ticket, queue, expiry, events, players, void marker.
-- ARGV: id, data, ttl_s, use_idem, retention_s, events_maxlen, ticket key prefix, player id...
-- Replies '+<created> <expires>' (created, stamped with Redis TIME), '!<pid> <tid>' (the player already
-- has a live ticket), '~' (another create voided this ticket: it took a player's lock while this one
-- had not run yet) or the id of the ticket an idempotency key created earlier.
if redis.call('EXISTS', KEYS[2]) == 1 then
  -- the same create again (a client retry after a lost reply): it happened once, say so again
  local f = redis.call('HMGET', KEYS[2], 'created', 'expires')
  return '+' .. f[1] .. ' ' .. f[2]
end
if redis.call('EXISTS', KEYS[7]) == 1 then return '~' end
if ARGV[4] == '1' then
  local prev = redis.call('GET', KEYS[1])
  if prev then return prev end
end
local now = now_s()
for i = 8, #ARGV do
  local other = redis.call('HGET', KEYS[6], ARGV[i])
  if other then
    local f = redis.call('HMGET', ARGV[7] .. other, 'status', 'expires')
    if f[1] == 'proposed' or (f[1] == 'queued' and tonumber(f[2]) > now) then
      return '!' .. ARGV[i] .. ' ' .. other
    end
  end
end
local ttl = tonumber(ARGV[3])
local created, expires = fmt(now), fmt(now + ttl)
for i = 8, #ARGV do redis.call('HSET', KEYS[6], ARGV[i], ARGV[1]) end
if ARGV[4] == '1' then redis.call('SET', KEYS[1], ARGV[1], 'PX', math.max(1, math.floor(ttl * 1000))) end
redis.call('HSET', KEYS[2], 'id', ARGV[1], 'data', ARGV[2], 'status', 'queued', 'created', created,
           'expires', expires)
redis.call('PEXPIRE', KEYS[2], math.floor((ttl + tonumber(ARGV[5])) * 1000))
redis.call('ZADD', KEYS[3], created, ARGV[1])
redis.call('ZADD', KEYS[4], expires, ARGV[1])
redis.call('XADD', KEYS[5], 'MAXLEN', '~', ARGV[6], '*', 'event', 'created', 'ticket', ARGV[1])
return '+' .. created .. ' ' .. expires
