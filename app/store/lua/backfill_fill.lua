-- KEYS: queue, expiry, pending, events, players, open backfills index, backfill, ticket...
-- ARGV: assigned (JSON), tickets (JSON), events_maxlen, result (one per ticket)...
-- All or nothing: the backfill open and unexpired, every ticket queued and unexpired; then every
-- ticket → matched with its result (players freed, a 'matched' event) and the backfill → filled
-- with the assignment. A ticket taken here is no longer queued, so no claim for a new match can
-- take it, and a ticket a claim took (proposed) is refused here. Replayed after it applied (a
-- retry), it answers 1 again and changes nothing. Replies 1 or 0.
local now = now_s()
local b = redis.call('HMGET', KEYS[7], 'status', 'expires', 'tickets', 'id', 'data')
if not b[1] then return 0 end
if b[1] == 'filled' and b[3] == ARGV[2] then return 1 end
if b[1] ~= 'open' or tonumber(b[2]) <= now or #KEYS < 8 then return 0 end
local d = cjson.decode(b[5])
for i = 8, #KEYS do
  local f = redis.call('HMGET', KEYS[i], 'status', 'expires')
  if f[1] ~= 'queued' or tonumber(f[2]) <= now then return 0 end
end
for i = 8, #KEYS do
  local k = KEYS[i]
  local tid = redis.call('HGET', k, 'id')
  redis.call('HSET', k, 'status', 'matched', 'match_id', '', 'lease', '', 'result', ARGV[3 + i - 7])
  redis.call('ZREM', KEYS[1], tid)
  redis.call('ZREM', KEYS[2], tid)
  redis.call('ZREM', KEYS[3], tid)
  free_players(KEYS[5], k, tid)
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[3], '*', 'event', 'matched', 'ticket', tid,
             'match_id', d['match_id'], 'backfill', b[4])
end
redis.call('HSET', KEYS[7], 'status', 'filled', 'assigned', ARGV[1], 'tickets', ARGV[2], 'filled_at', fmt(now))
redis.call('ZREM', KEYS[6], b[4])
return 1
