-- Prepended to every script. "Now" is Redis TIME, never a client's clock: every host agrees on
-- expiry and leases (Redis 7 replicates a script's effects, so TIME is allowed before writes).
local function now_s()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end

local function fmt(x)
  return string.format('%.6f', x)
end

-- The id at the end of a ticket key ('<prefix>:{pool}:t:<id>').
local function id_of(k)
  return string.match(k, ':t:(.*)$')
end

-- Forget the ticket's players in the players hash, each only while it still names this ticket.
local function free_players(players_key, ticket_key, tid)
  local data = redis.call('HGET', ticket_key, 'data')
  if not data then return end
  local ok, d = pcall(cjson.decode, data)
  if not ok or type(d) ~= 'table' or type(d['players']) ~= 'table' then return end
  for _, p in ipairs(d['players']) do
    local pid = p['id']
    if pid ~= nil and redis.call('HGET', players_key, pid) == tid then
      redis.call('HDEL', players_key, pid)
    end
  end
end

-- proposed (by match_id; '' = by anyone) → queued, back at its place (score = creation time).
local function requeue(queue, expiry, pending, k, match_id)
  local f = redis.call('HMGET', k, 'status', 'match_id', 'id', 'created', 'expires')
  if f[1] == 'proposed' and (match_id == '' or f[2] == match_id) then
    redis.call('HSET', k, 'status', 'queued', 'match_id', '', 'lease', '')
    redis.call('ZREM', pending, f[3])
    redis.call('ZADD', queue, f[4], f[3])
    redis.call('ZADD', expiry, f[5], f[3])
    return 1
  end
  return 0
end

-- A claim's check of the ticket keys KEYS[first..]: how many of them match_id already holds (a
-- retried claim), or nil when one is neither queued (unexpired) nor held, so the claim must fail.
local function claimable(first, match_id, now)
  local held = 0
  for i = first, #KEYS do
    local f = redis.call('HMGET', KEYS[i], 'status', 'expires', 'match_id')
    if f[1] == 'proposed' and f[3] == match_id then
      held = held + 1
    elseif not (f[1] == 'queued' and tonumber(f[2]) > now) then
      return nil
    end
  end
  return held
end

-- The ticket keys KEYS[first..] (ids ARGV[first - 1..]) → proposed by match_id until lease: out of the
-- queue and expiry indexes, into pending.
local function propose(queue, expiry, pending, first, match_id, lease)
  for i = first, #KEYS do
    local tid = ARGV[i - 1]
    redis.call('HSET', KEYS[i], 'status', 'proposed', 'match_id', match_id, 'lease', fmt(lease))
    redis.call('ZREM', queue, tid)
    redis.call('ZREM', expiry, tid)
    redis.call('ZADD', pending, lease, tid)
  end
end

-- Append a ticket event to the pool's events stream, trimmed to about maxlen (app/events.py maps `kind`
-- to the public type clients see; a new kind needs a row there). The optional tail is field, value pairs;
-- a pair whose value is nil or '' is left out. Returns the entry id.
local function emit(events, maxlen, kind, tid, ...)
  local args = {'XADD', events, 'MAXLEN', '~', maxlen, '*', 'event', kind, 'ticket', tid}
  local extra = {...}
  for i = 1, #extra, 2 do
    local v = extra[i + 1]
    if v ~= nil and v ~= '' then
      args[#args + 1] = extra[i]
      args[#args + 1] = v
    end
  end
  return redis.call(unpack(args))
end

-- Any status → expired with a reason: out of every index, players freed, an event emitted.
local function expire(queue, expiry, pending, events, players, k, tid, reason, maxlen)
  redis.call('HSET', k, 'status', 'expired', 'lease', '', 'reason', reason)
  redis.call('ZREM', queue, tid)
  redis.call('ZREM', expiry, tid)
  redis.call('ZREM', pending, tid)
  free_players(players, k, tid)
  emit(events, maxlen, 'expired', tid, 'reason', reason)
end
