"""The Redis store: tickets as hashes with expiry, Lua scripts for every multi-key change, streams.

Every state change that touches more than one key is one Lua script, so it is atomic on the
pool's shard: create (with idempotency), claim (all tickets of a candidate pool or none), commit,
release, cancel and the reaper. Solve jobs travel on a per-pool stream read by the ``solvers``
consumer group; a job whose worker died is taken over with XAUTOCLAIM.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import anyio.to_thread
import redis
import redis.asyncio as aioredis

from .keys import BLOCK_MS, EVENTS_MAXLEN, SOLVER_GROUP, TICKET_RETENTION_S, Keys
from .store import Conflict, MatchResult, Store, Ticket, pool_of

# KEYS: idem, ticket, queue, expiry, events, players. ARGV: id, data, created, expires, idem_ttl_ms, use_idem,
# retention_ms, events_maxlen, ticket key prefix (same hash tag), now, player id...
# A player id whose live ticket (queued or proposed, unexpired) exists refuses the create: '!<pid> <tid>'.
_CREATE = """
if ARGV[6] == '1' then
  local prev = redis.call('GET', KEYS[1])
  if prev then return prev end
end
for i = 11, #ARGV do
  local other = redis.call('HGET', KEYS[6], ARGV[i])
  if other then
    local f = redis.call('HMGET', ARGV[9] .. other, 'status', 'expires')
    if (f[1] == 'proposed') or (f[1] == 'queued' and tonumber(f[2]) > tonumber(ARGV[10])) then
      return '!' .. ARGV[i] .. ' ' .. other
    end
  end
end
for i = 11, #ARGV do redis.call('HSET', KEYS[6], ARGV[i], ARGV[1]) end
if ARGV[6] == '1' then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[5]) end
redis.call('HSET', KEYS[2], 'id', ARGV[1], 'data', ARGV[2], 'status', 'queued', 'created', ARGV[3], 'expires', ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[7])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1])
redis.call('ZADD', KEYS[4], ARGV[4], ARGV[1])
redis.call('XADD', KEYS[5], 'MAXLEN', '~', ARGV[8], '*', 'event', 'created', 'ticket', ARGV[1])
return ''
"""

# KEYS: queue, expiry, pending, ticket... ARGV: match_id, lease_until, now, id...
_CLAIM = """
for i = 4, #KEYS do
  local f = redis.call('HMGET', KEYS[i], 'status', 'expires')
  if f[1] ~= 'queued' or tonumber(f[2]) <= tonumber(ARGV[3]) then return 0 end
end
for i = 4, #KEYS do
  redis.call('HSET', KEYS[i], 'status', 'proposed', 'match_id', ARGV[1], 'lease', ARGV[2])
  redis.call('ZREM', KEYS[1], ARGV[i])
  redis.call('ZREM', KEYS[2], ARGV[i])
  redis.call('ZADD', KEYS[3], ARGV[2], ARGV[i])
end
return 1
"""

_REQUEUE_FN = """
local function requeue(k, match_id)
  local f = redis.call('HMGET', k, 'status', 'match_id', 'id', 'created', 'expires')
  if f[1] == 'proposed' and (match_id == '' or f[2] == match_id) then
    redis.call('HSET', k, 'status', 'queued', 'match_id', '', 'lease', '')
    redis.call('ZREM', KEYS[3], f[3])
    redis.call('ZADD', KEYS[1], f[4], f[3])
    redis.call('ZADD', KEYS[2], f[5], f[3])
    return 1
  end
  return 0
end
"""

# KEYS: queue, expiry, pending, events, selected..., unselected... ARGV: match_id, n_selected, result...
_COMMIT = _REQUEUE_FN + """
local n = tonumber(ARGV[2])
local total = #KEYS - 4
local ok = true
for i = 1, n do
  local f = redis.call('HMGET', KEYS[4 + i], 'status', 'match_id')
  if f[1] ~= 'proposed' or f[2] ~= ARGV[1] then ok = false end
end
if not ok then
  for i = 1, total do requeue(KEYS[4 + i], ARGV[1]) end
  return 0
end
for i = 1, n do
  local k = KEYS[4 + i]
  local tid = redis.call('HGET', k, 'id')
  redis.call('HSET', k, 'status', 'matched', 'lease', '', 'result', ARGV[2 + i])
  redis.call('ZREM', KEYS[3], tid)
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[3 + n], '*', 'event', 'matched', 'ticket', tid, 'match_id', ARGV[1])
end
for i = n + 1, total do requeue(KEYS[4 + i], ARGV[1]) end
return 1
"""

# KEYS: queue, expiry, pending, ticket... ARGV: match_id ('' = any proposal whose lease ran out), now
_RELEASE = _REQUEUE_FN + """
local moved = 0
for i = 4, #KEYS do
  if ARGV[1] ~= '' then
    moved = moved + requeue(KEYS[i], ARGV[1])
  else
    local lease = redis.call('HGET', KEYS[i], 'lease')
    if lease and lease ~= '' and tonumber(lease) <= tonumber(ARGV[2]) then
      moved = moved + requeue(KEYS[i], '')
    elseif not lease then
      redis.call('ZREM', KEYS[3], string.match(KEYS[i], ':t:(.*)$'))
    end
  end
end
return moved
"""

# KEYS: queue, expiry, pending, ticket... ARGV: claim_id, new_id, lease_until
# Fencing: tickets proposed by the claim, or by an earlier takeover of it ('<claim_id>.<token>'), are
# re-stamped with the new id; a runner still holding an older id can neither commit nor release them.
_TAKEOVER = """
local n = 0
local prefix = ARGV[1] .. '.'
for i = 4, #KEYS do
  local f = redis.call('HMGET', KEYS[i], 'status', 'match_id', 'id')
  if f[1] == 'proposed' and (f[2] == ARGV[1] or string.sub(f[2], 1, #prefix) == prefix) then
    redis.call('HSET', KEYS[i], 'match_id', ARGV[2], 'lease', ARGV[3])
    redis.call('ZADD', KEYS[3], ARGV[3], f[3])
    n = n + 1
  end
end
return n
"""

# KEYS: queue, expiry, pending, events, ticket. ARGV: now
_CANCEL = """
local f = redis.call('HMGET', KEYS[5], 'status', 'id', 'expires')
if not f[1] then return '' end
if f[1] == 'queued' and tonumber(f[3]) <= tonumber(ARGV[1]) then return 'expired' end
if f[1] ~= 'queued' and f[1] ~= 'proposed' then return f[1] end
redis.call('HSET', KEYS[5], 'status', 'cancelled', 'lease', '')
redis.call('ZREM', KEYS[1], f[2])
redis.call('ZREM', KEYS[2], f[2])
redis.call('ZREM', KEYS[3], f[2])
redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[2], '*', 'event', 'cancelled', 'ticket', f[2])
return 'ok'
"""

# KEYS: queue, expiry, events, ticket... ARGV: now
_EXPIRE = """
local n = 0
for i = 4, #KEYS do
  local f = redis.call('HMGET', KEYS[i], 'status', 'id', 'expires')
  local tid = string.match(KEYS[i], ':t:(.*)$')
  if f[1] == 'queued' and tonumber(f[3]) <= tonumber(ARGV[1]) then
    redis.call('HSET', KEYS[i], 'status', 'expired')
    redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[2], '*', 'event', 'expired', 'ticket', f[2])
    n = n + 1
  end
  if f[1] ~= 'queued' then
    redis.call('ZREM', KEYS[1], tid)
    redis.call('ZREM', KEYS[2], tid)
  end
end
return n
"""


# Blocking reads wait BLOCK_MS (1 s); the socket timeout must stay above that.
_CLIENT_OPTIONS: dict[str, Any] = {"decode_responses": True, "socket_timeout": 10, "socket_connect_timeout": 5,
                                   "health_check_interval": 30}


class RedisStore(Store):
    """Production store. Thread-safe (redis-py pools connections)."""

    def __init__(self, client: redis.Redis, prefix: str = "mgm", url: str | None = None):
        self.r = client
        self.keys = Keys(prefix)
        # the API's async hot path gets its own asyncio client per event loop (built lazily from the URL)
        self._url = url
        self._aio: tuple[asyncio.AbstractEventLoop, aioredis.Redis, dict[str, Any]] | None = None
        self._create = client.register_script(_CREATE)
        self._claim = client.register_script(_CLAIM)
        self._commit = client.register_script(_COMMIT)
        self._release = client.register_script(_RELEASE)
        self._takeover = client.register_script(_TAKEOVER)
        self._cancel = client.register_script(_CANCEL)
        self._expire = client.register_script(_EXPIRE)
        self._groups: set[str] = set()

    @staticmethod
    def from_url(url: str, prefix: str = "mgm") -> RedisStore:
        client = redis.Redis.from_url(url, **_CLIENT_OPTIONS)
        return RedisStore(client, prefix, url=url)

    def _async(self) -> tuple[aioredis.Redis, dict[str, Any]] | None:
        """The asyncio client and scripts of the running loop (None: no URL, use threads)."""
        if self._url is None:
            return None
        loop = asyncio.get_running_loop()
        if self._aio is None or self._aio[0] is not loop:
            client = aioredis.Redis.from_url(self._url, **_CLIENT_OPTIONS)
            scripts = {"create": client.register_script(_CREATE), "cancel": client.register_script(_CANCEL)}
            self._aio = (loop, client, scripts)
        return self._aio[1], self._aio[2]

    # ------------------------------------------------------------------ tickets

    def _pool_keys(self, pool: str) -> list[str]:
        k = self.keys
        return [k.queue(pool), k.expiry(pool), k.pending(pool)]

    def _create_kv(self, ticket: Ticket, idempotency_key: str | None) -> dict[str, list]:
        k, pool = self.keys, ticket.pool
        ttl_ms = max(1, int((ticket.expires_at - ticket.created_at) * 1000))
        idem_key = k.idempotency(pool, idempotency_key or "-")
        return {"keys": [idem_key, k.ticket(pool, ticket.id), k.queue(pool), k.expiry(pool), k.events(pool),
                         k.players(pool)],
                "args": [ticket.id, ticket.data_json(), repr(ticket.created_at), repr(ticket.expires_at), ttl_ms,
                         "1" if idempotency_key else "0", ttl_ms + TICKET_RETENTION_S * 1000, EVENTS_MAXLEN,
                         k.ticket(pool, ""), repr(time.time()), *(p["id"] for p in ticket.players)]}

    def _create_call(self, ticket: Ticket, idempotency_key: str | None, client=None):
        return self._create(**self._create_kv(ticket, idempotency_key), client=client)

    def create_many(self, items: list[tuple[Ticket, str | None]]) -> list[tuple[Ticket, bool] | Conflict]:
        """One round trip for the whole batch (a pipeline of the create script)."""
        pipe = self.r.pipeline(transaction=False)
        for t, key in items:
            self._create_call(t, key, client=pipe)
        out: list[tuple[Ticket, bool] | Conflict] = []
        for (t, _), prev in zip(items, pipe.execute(), strict=True):
            try:
                out.append(self._created(t, prev))
            except Conflict as err:
                out.append(err)
        return out

    def create(self, ticket: Ticket, idempotency_key: str | None = None) -> tuple[Ticket, bool]:
        return self._created(ticket, self._create_call(ticket, idempotency_key))

    @staticmethod
    def _earlier_id(prev: str) -> str | None:
        """Read the create script's reply: '' = created; '!<pid> <tid>' = the player is already queued
        (raises Conflict); else the id of the ticket the idempotency key made earlier."""
        if prev and prev.startswith("!"):
            pid, other = prev[1:].split(" ", 1)
            raise Conflict(f"player {pid!r} is already queued in ticket {other}")
        return prev or None

    def _created(self, ticket: Ticket, prev: str) -> tuple[Ticket, bool]:
        earlier_id = self._earlier_id(prev)
        earlier = self.get(earlier_id) if earlier_id else None
        return (earlier, False) if earlier is not None else (ticket, True)

    async def _acreated(self, ticket: Ticket, prev: str) -> tuple[Ticket, bool]:
        earlier_id = self._earlier_id(prev)
        earlier = await self.aget(earlier_id) if earlier_id else None
        return (earlier, False) if earlier is not None else (ticket, True)

    async def acreate(self, ticket: Ticket, idempotency_key: str | None = None) -> tuple[Ticket, bool]:
        aio = self._async()
        if aio is None:
            return await anyio.to_thread.run_sync(self.create, ticket, idempotency_key)
        prev = await aio[1]["create"](**self._create_kv(ticket, idempotency_key))
        return await self._acreated(ticket, prev)

    async def acreate_many(self, items: list[tuple[Ticket, str | None]]) -> list[tuple[Ticket, bool] | Conflict]:
        aio = self._async()
        if aio is None:
            return await anyio.to_thread.run_sync(self.create_many, items)
        client, scripts = aio
        async with client.pipeline(transaction=False) as pipe:
            for t, key in items:
                await scripts["create"](**self._create_kv(t, key), client=pipe)
            prevs = await pipe.execute()
        out: list[tuple[Ticket, bool] | Conflict] = []
        for (t, _), prev in zip(items, prevs, strict=True):
            try:
                out.append(await self._acreated(t, prev))
            except Conflict as err:
                out.append(err)
        return out

    async def aget(self, ticket_id: str) -> Ticket | None:
        aio = self._async()
        if aio is None:
            return await anyio.to_thread.run_sync(self.get, ticket_id)
        pool = pool_of(ticket_id)
        if pool is None:
            return None
        f = await aio[0].hgetall(self.keys.ticket(pool, ticket_id))
        return Ticket.from_fields(ticket_id, f).view() if f else None

    async def acancel(self, ticket_id: str) -> Ticket | None:
        aio = self._async()
        if aio is None:
            return await anyio.to_thread.run_sync(self.cancel, ticket_id)
        pool = pool_of(ticket_id)
        if pool is None:
            return None
        out = await aio[1]["cancel"](**self._cancel_kv(pool, ticket_id))
        return await self.aget(ticket_id) if self._cancelled(out) else None

    def get(self, ticket_id: str) -> Ticket | None:
        pool = pool_of(ticket_id)
        if pool is None:
            return None
        f = self.r.hgetall(self.keys.ticket(pool, ticket_id))
        if not f:
            return None
        return Ticket.from_fields(ticket_id, f).view()

    def cancel(self, ticket_id: str) -> Ticket | None:
        pool = pool_of(ticket_id)
        if pool is None:
            return None
        out = self._cancel(**self._cancel_kv(pool, ticket_id))
        return self.get(ticket_id) if self._cancelled(out) else None

    def _cancel_kv(self, pool: str, ticket_id: str) -> dict[str, list]:
        return {"keys": [*self._pool_keys(pool), self.keys.events(pool), self.keys.ticket(pool, ticket_id)],
                "args": [repr(time.time()), EVENTS_MAXLEN]}

    @staticmethod
    def _cancelled(out: str) -> bool:
        """Read the cancel script's reply: True = cancelled, False = no such ticket; else the ticket's
        status, which cannot be cancelled (raises Conflict)."""
        if out not in ("", "ok"):
            raise Conflict(f"ticket is {out}")
        return out == "ok"

    def queued(self, pool: str, limit: int = 10_000) -> list[Ticket]:
        ids = self.r.zrange(self.keys.queue(pool), 0, limit - 1)
        if not ids:
            return []
        pipe = self.r.pipeline(transaction=False)
        for tid in ids:
            pipe.hgetall(self.keys.ticket(pool, tid))
        now = time.time()
        out = []
        for tid, f in zip(ids, pipe.execute(), strict=True):
            if f and f.get("status") == "queued":
                t = Ticket.from_fields(tid, f)
                if t.expires_at > now:
                    out.append(t)
        return out

    def queue_depth(self, pool: str) -> int:
        return int(self.r.zcard(self.keys.queue(pool)))

    def claim(self, pool: str, ticket_ids: list[str], match_id: str, lease_until: float) -> bool:
        if not ticket_ids:
            return False
        keys = [*self._pool_keys(pool), *(self.keys.ticket(pool, t) for t in ticket_ids)]
        return bool(self._claim(keys=keys, args=[match_id, repr(lease_until), repr(time.time()), *ticket_ids]))

    def commit(self, pool: str, match_id: str, selected: list[str], unselected: list[str],
               result: MatchResult) -> bool:
        keys = [*self._pool_keys(pool), self.keys.events(pool),
                *(self.keys.ticket(pool, t) for t in selected), *(self.keys.ticket(pool, t) for t in unselected)]
        results = [json.dumps(result.for_ticket(t)) for t in selected]
        return bool(self._commit(keys=keys, args=[match_id, len(selected), *results, EVENTS_MAXLEN]))

    def release(self, pool: str, match_id: str, ticket_ids: list[str]) -> int:
        if not ticket_ids:
            return 0
        keys = [*self._pool_keys(pool), *(self.keys.ticket(pool, t) for t in ticket_ids)]
        return int(self._release(keys=keys, args=[match_id, repr(time.time())]))

    def takeover(self, pool: str, claim_id: str, new_id: str, ticket_ids: list[str], lease_until: float) -> int:
        keys = [*self._pool_keys(pool), *(self.keys.ticket(pool, t) for t in ticket_ids)]
        return int(self._takeover(keys=keys, args=[claim_id, new_id, repr(lease_until)]))

    def reap(self, pool: str, now: float | None = None) -> tuple[int, int]:
        now = time.time() if now is None else now
        k = self.keys
        expired = released = 0
        due = self.r.zrangebyscore(k.expiry(pool), "-inf", now, start=0, num=500)
        if due:
            expired = int(self._expire(keys=[k.queue(pool), k.expiry(pool), k.events(pool),
                                             *(k.ticket(pool, t) for t in due)], args=[repr(now), EVENTS_MAXLEN]))
        late = self.r.zrangebyscore(k.pending(pool), "-inf", now, start=0, num=500)
        if late:
            released = int(self._release(keys=[*self._pool_keys(pool), *(k.ticket(pool, t) for t in late)],
                                         args=["", repr(now)]))
        return expired, released

    def ping(self) -> bool:
        try:
            return bool(self.r.ping())
        except redis.RedisError:
            return False

    def close(self) -> None:
        self.r.close()
        self._aio = None  # the asyncio client closes with its event loop

    # ------------------------------------------------------------------ solve jobs (streams)

    def ensure_group(self, stream: str, group: str) -> None:
        if stream in self._groups:
            return
        try:
            self.r.xgroup_create(stream, group, id="0", mkstream=True)
        except redis.ResponseError as err:
            if "BUSYGROUP" not in str(err):
                raise
        self._groups.add(stream)

    def publish_job(self, pool: str, job: dict[str, Any]) -> str:
        stream = self.keys.jobs(pool)
        self.ensure_group(stream, SOLVER_GROUP)
        return self.r.xadd(stream, {"job": json.dumps(job)})

    def read_jobs(self, pool: str, consumer: str, count: int = 1, block_ms: int | None = BLOCK_MS) -> list[tuple[str, dict]]:
        stream = self.keys.jobs(pool)
        self.ensure_group(stream, SOLVER_GROUP)
        resp = self.r.xreadgroup(SOLVER_GROUP, consumer, {stream: ">"}, count=count, block=block_ms)
        return [(eid, json.loads(f["job"])) for _, entries in (resp or []) for eid, f in entries if f]

    def autoclaim_jobs(self, pool: str, consumer: str, min_idle_ms: int, count: int = 10) -> list[tuple[str, dict]]:
        """Take over jobs another solver read and never acknowledged (it crashed)."""
        stream = self.keys.jobs(pool)
        self.ensure_group(stream, SOLVER_GROUP)
        resp = self.r.xautoclaim(stream, SOLVER_GROUP, consumer, min_idle_time=min_idle_ms, start_id="0-0", count=count)
        entries = resp[1] if resp else []
        return [(eid, json.loads(f["job"])) for eid, f in entries if f]

    def ack_job(self, pool: str, entry_id: str) -> None:
        # acknowledged jobs are deleted: no MAXLEN trimming that could drop a pending entry
        stream = self.keys.jobs(pool)
        pipe = self.r.pipeline(transaction=False)
        pipe.xack(stream, SOLVER_GROUP, entry_id)
        pipe.xdel(stream, entry_id)
        pipe.execute()

    def jobs_lag(self, pool: str) -> int:
        """Jobs waiting or in flight in the solver group (what a KEDA scaler reads)."""
        try:
            groups = self.r.xinfo_groups(self.keys.jobs(pool))
        except redis.ResponseError:
            return 0
        for g in groups:
            if g["name"] == SOLVER_GROUP:
                return int(g.get("lag") or 0) + int(g.get("pending") or 0)
        return 0

    def heartbeat(self, kind: str, worker_id: str, ttl_s: int) -> None:
        self.r.set(self.keys.heartbeat(kind, worker_id), repr(time.time()), ex=ttl_s)

    def workers(self, kind: str) -> list[str]:
        return [k.rsplit(":", 1)[1] for k in self.r.scan_iter(self.keys.heartbeat_pattern(kind), count=100)]

    def acquire_leader(self, pool: str, worker_id: str, ttl_ms: int) -> bool:
        """One matchmaker loop per pool: take or renew the pool's leader key."""
        key = self.keys.leader(pool)
        if self.r.set(key, worker_id, nx=True, px=ttl_ms):
            return True
        if self.r.get(key) == worker_id:
            self.r.pexpire(key, ttl_ms)
            return True
        return False
