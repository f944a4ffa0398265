-- KEYS: the kind's worker set. Replies the ids whose deadline is still ahead of Redis TIME.
return redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. fmt(now_s()), '+inf')
