-- KEYS: queue, pending, players, throughput. ARGV: ticket id, window_s
-- One read for a wait estimate: the ticket's rank in the queue (-1: not queued), the queue's size,
-- the proposed tickets, the players with a live ticket, Redis TIME and the recent matches
-- ({member, score} pairs, member '<players>:<token>', score the commit's time).
local now = now_s()
local rank = redis.call('ZRANK', KEYS[1], ARGV[1])
if not rank then rank = -1 end
local samples = redis.call('ZRANGEBYSCORE', KEYS[4], fmt(now - tonumber(ARGV[2])), '+inf', 'WITHSCORES')
return {rank, redis.call('ZCARD', KEYS[1]), redis.call('ZCARD', KEYS[2]), redis.call('HLEN', KEYS[3]), fmt(now),
        samples}
