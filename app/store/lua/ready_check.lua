-- KEYS: queue, expiry, pending, events, players, checks index, check hash (answer, finish) or the index again
--       (reap, take), match hash, match index (the record's, kept when everyone accepted), allocations index
--       (confirmed checks waiting for a game server, by when they may be taken)
-- ARGV: mode ('answer' | 'reap' | 'take' | 'finish'), ticket key prefix, events_maxlen, check key prefix, then
--   answer: match_id, player_id, accept ('1' | '0'), owner ('' = any), retention_s, max_count, match key prefix,
--           allocate ('1': the last accept makes the check 'allocating', not 'matched')
--   reap:   batch
--   take:   lease_s, limit
--   finish: match_id, assignment JSON ('' = the allocator failed), reason, retention_s, max_count, match key prefix
-- answer replies the check's state after it: pending | allocating | matched | declined | expired | unknown.
-- reap replies how many overdue checks it ended; take a JSON list of {match_id, teams, region}; finish the
-- check's state after it: matched | unallocated | expired (a ticket was cancelled) | another state it had.
local TIMEOUT = 'ready check timed out: a player did not accept'
local prefix, maxlen = ARGV[2], ARGV[3]

local function in_check(k, mid)
  local f = redis.call('HMGET', k, 'status', 'match_id')
  return f[1] == 'proposed' and f[2] == mid
end

-- A decline (decliner = its ticket id) or a timeout (timed_out): the decliner's ticket ends declined, on a
-- timeout every ticket with a player who did not accept ends expired; the others go back to their place.
local function end_check(ck, mid, decliner, timed_out)
  local tickets = cjson.decode(redis.call('HGET', ck, 'tickets'))
  for _, tid in ipairs(tickets) do
    local k = prefix .. tid
    if in_check(k, mid) then
      local waiting = false
      if timed_out then
        local d = cjson.decode(redis.call('HGET', k, 'data'))
        for _, p in ipairs(d['players']) do
          if redis.call('HEXISTS', ck, 'a:' .. p['id']) == 0 then waiting = true end
        end
      end
      if tid == decliner then
        redis.call('HSET', k, 'status', 'declined', 'lease', '', 'reason', 'declined the match')
        free_players(KEYS[5], k, tid)
        redis.call('XADD', KEYS[4], 'MAXLEN', '~', maxlen, '*', 'event', 'declined', 'ticket', tid, 'match_id', mid)
      elseif waiting then
        expire(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], k, tid, TIMEOUT, maxlen)
      else
        local f = redis.call('HMGET', k, 'created', 'expires')
        redis.call('HSET', k, 'status', 'queued', 'match_id', '', 'lease', '', 'result', '')
        redis.call('ZADD', KEYS[1], f[1], tid)
        redis.call('ZADD', KEYS[2], f[2], tid)
        redis.call('XADD', KEYS[4], 'MAXLEN', '~', maxlen, '*', 'event', 'queued', 'ticket', tid, 'requeued_from', mid)
      end
    end
  end
  local status = decliner and 'declined' or 'expired'
  redis.call('HSET', ck, 'status', status)
  redis.call('ZREM', KEYS[6], mid)
  return status
end

-- Every player accepted (and, with an allocator, it answered): the tickets are matched, the record kept.
local function confirm(ck, mid, tickets, now, assignment, retention, max_count, match_prefix)
  for _, t in ipairs(tickets) do
    local k = prefix .. t
    local res = cjson.decode(redis.call('HGET', k, 'result'))
    res['matched_at'] = now
    if assignment then res['assignment'] = assignment end
    redis.call('HSET', k, 'status', 'matched', 'lease', '', 'result', cjson.encode(res))
    free_players(KEYS[5], k, t)
    redis.call('XADD', KEYS[4], 'MAXLEN', '~', maxlen, '*', 'event', 'matched', 'ticket', t, 'match_id', mid)
  end
  local record = redis.call('HGET', ck, 'record')
  if record and record ~= '' then
    local mkey, index = KEYS[8], KEYS[9]
    redis.call('DEL', mkey)
    redis.call('HSET', mkey, 'record', record, 'time', fmt(now))
    redis.call('PEXPIRE', mkey, math.max(1, math.floor(retention * 1000)))
    redis.call('ZADD', index, fmt(now), mid)
    redis.call('ZREMRANGEBYSCORE', index, '-inf', '(' .. fmt(now - retention))
    local extra = redis.call('ZCARD', index) - max_count
    if extra > 0 then
      for _, old in ipairs(redis.call('ZRANGE', index, 0, extra - 1)) do
        redis.call('DEL', match_prefix .. old)
      end
      redis.call('ZREMRANGEBYRANK', index, 0, extra - 1)
    end
  end
  redis.call('HSET', ck, 'status', 'matched')
  redis.call('ZREM', KEYS[6], mid)
  redis.call('ZREM', KEYS[10], mid)
  return 'matched'
end

if ARGV[1] == 'take' then
  local now, lease, out = now_s(), tonumber(ARGV[5]), {}
  for _, mid in ipairs(redis.call('ZRANGEBYSCORE', KEYS[10], '-inf', now, 'LIMIT', 0, tonumber(ARGV[6]))) do
    local ck = ARGV[4] .. mid
    if redis.call('HGET', ck, 'status') == 'allocating' then
      redis.call('ZADD', KEYS[10], now + lease, mid)
      local first = cjson.decode(redis.call('HGET', ck, 'tickets'))[1]
      local res = cjson.decode(redis.call('HGET', prefix .. first, 'result') or 'null')
      if type(res) ~= 'table' then res = {} end
      out[#out + 1] = cjson.encode({match_id = mid, teams = res['teams'], region = res['region']})
    else
      redis.call('ZREM', KEYS[10], mid)
    end
  end
  return out
end

if ARGV[1] == 'finish' then
  local ck, mid = KEYS[7], ARGV[5]
  local st = redis.call('HGET', ck, 'status')
  if not st then return 'unknown' end
  if st ~= 'allocating' then return st end
  local tickets = cjson.decode(redis.call('HGET', ck, 'tickets'))
  for _, t in ipairs(tickets) do
    if not in_check(prefix .. t, mid) then
      redis.call('ZREM', KEYS[10], mid)
      return end_check(ck, mid, nil, false)  -- one was cancelled
    end
  end
  if ARGV[6] ~= '' then
    return confirm(ck, mid, tickets, now_s(), cjson.decode(ARGV[6]), tonumber(ARGV[8]), tonumber(ARGV[9]), ARGV[10])
  end
  for _, t in ipairs(tickets) do  -- no game server: every player back to their place, with the reason
    local k = prefix .. t
    local f = redis.call('HMGET', k, 'created', 'expires')
    redis.call('HSET', k, 'status', 'queued', 'match_id', '', 'lease', '', 'result', '')
    if ARGV[7] ~= '' then redis.call('HSET', k, 'unmatched', ARGV[7]) end
    redis.call('ZADD', KEYS[1], f[1], t)
    redis.call('ZADD', KEYS[2], f[2], t)
    redis.call('XADD', KEYS[4], 'MAXLEN', '~', maxlen, '*', 'event', 'queued', 'ticket', t, 'requeued_from', mid)
  end
  redis.call('HSET', ck, 'status', 'unallocated')
  redis.call('ZREM', KEYS[10], mid)
  return 'unallocated'
end

if ARGV[1] == 'reap' then
  local now, n = now_s(), 0
  for _, mid in ipairs(redis.call('ZRANGEBYSCORE', KEYS[6], '-inf', now, 'LIMIT', 0, tonumber(ARGV[5]))) do
    local ck = ARGV[4] .. mid
    if redis.call('HGET', ck, 'status') == 'pending' then
      end_check(ck, mid, nil, true)
      n = n + 1
    else
      redis.call('ZREM', KEYS[6], mid)
    end
  end
  return n
end

local ck, mid, pid, owner = KEYS[7], ARGV[5], ARGV[6], ARGV[8]
local c = redis.call('HMGET', ck, 'status', 'players', 'owners', 'deadline')
if not c[1] then return 'unknown' end
local tid = cjson.decode(c[2])[pid]
if not tid then return 'unknown' end
if owner ~= '' then
  local ok = false
  for _, o in ipairs(cjson.decode(c[3])) do if o == owner then ok = true end end
  if not ok then return 'unknown' end
end
if c[1] ~= 'pending' then return c[1] end
local now = now_s()
if tonumber(c[4]) <= now then return end_check(ck, mid, nil, true) end
if ARGV[7] == '0' then return end_check(ck, mid, tid, false) end
if redis.call('HSETNX', ck, 'a:' .. pid, '1') == 1 then redis.call('HINCRBY', ck, 'accepted', 1) end
local players = 0
for _ in pairs(cjson.decode(c[2])) do players = players + 1 end
if tonumber(redis.call('HGET', ck, 'accepted')) < players then return 'pending' end
local tickets = cjson.decode(redis.call('HGET', ck, 'tickets'))
for _, t in ipairs(tickets) do
  if not in_check(prefix .. t, mid) then return end_check(ck, mid, nil, false) end  -- one was cancelled
end
if ARGV[12] == '1' then
  redis.call('HSET', ck, 'status', 'allocating')
  redis.call('ZREM', KEYS[6], mid)
  redis.call('ZADD', KEYS[10], now, mid)
  return 'allocating'
end
return confirm(ck, mid, tickets, now, nil, tonumber(ARGV[9]), tonumber(ARGV[10]), ARGV[11])
