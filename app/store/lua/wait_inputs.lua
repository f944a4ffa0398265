-- KEYS: queue, pending, players, throughput. ARGV: ticket id
-- One read for a wait estimate: the ticket's rank in the queue (-1: not queued), the queue's size,
-- the proposed tickets, the players with a live ticket, Redis TIME and the throughput record
-- (flat {second, players, ...}; at most ~120 seconds, see record_matched.lua).
local rank = redis.call('ZRANK', KEYS[1], ARGV[1])
if not rank then rank = -1 end
return {rank, redis.call('ZCARD', KEYS[1]), redis.call('ZCARD', KEYS[2]), redis.call('HLEN', KEYS[3]), fmt(now_s()),
        redis.call('HGETALL', KEYS[4])}
