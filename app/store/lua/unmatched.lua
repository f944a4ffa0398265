-- KEYS: ticket. ARGV: reason ('' clears it)
-- Why a queued (or proposed) ticket is not matched yet; 0 (nothing written) for any other status, so
-- an ended or unknown ticket is never re-created by the write.
local st = redis.call('HGET', KEYS[1], 'status')
if st ~= 'queued' and st ~= 'proposed' then return 0 end
if ARGV[1] == '' then
  redis.call('HDEL', KEYS[1], 'unmatched')
else
  redis.call('HSET', KEYS[1], 'unmatched', ARGV[1])
end
return 1
