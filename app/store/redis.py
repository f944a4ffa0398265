"""The Redis store: tickets as hashes with expiry, Lua scripts for every multi-key change, streams.

Every state change that touches more than one key is one Lua script (``lua/*.lua``), so it is
atomic on the pool's shard: create (with idempotency), claim (all tickets of a candidate pool or
none), commit, release, takeover, cancel, expire and the reaper. Every script reads "now" from
Redis ``TIME``: expiry and leases follow one clock, not each host's. Solve jobs travel on a
per-pool stream read by the ``solvers`` consumer group; a job whose worker died is taken over with
XAUTOCLAIM, and one delivered too often goes to the pool's dead-letter stream.

Failures: every public method turns a Redis that cannot answer now (connection refused or reset,
timeout, loading its data, read-only or without master during a failover, out of memory, refusing
writes after a failed save) into :class:`StoreUnavailable`; a consumer group that vanished with
the data (``NOGROUP``) is created again and the call retried; scripts flushed by a restart are
loaded again by redis-py (``NOSCRIPT``); replies lost on a broken connection are retried a few
times, and every script is safe to replay.

Redis Cluster: a URL ``redis+cluster://host:port`` (``rediss+cluster://`` with TLS; any one node of
the cluster, database 0) selects redis-py's cluster clients. Every multi-key script, pipeline and
transaction touches the keys of one pool (one ``{pool}`` hash slot) or of ``{infer}`` only; MOVED
and ASK are followed by the client; a failover (CLUSTERDOWN, TRYAGAIN, MASTERDOWN, a node gone, a
blocked read cut by the role change) is StoreUnavailable like any outage.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import json
import logging
import os
import threading
import time
from importlib import resources
from typing import Any

import anyio.to_thread
import redis
import redis.asyncio as aioredis
import redis.asyncio.cluster as aiocluster
import redis.cluster
import redis.exceptions as rex
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import ExponentialWithJitterBackoff
from redis.commands.core import Script
from redis.connection import Encoder
from redis.retry import Retry

from ..keys import (
    BLOCK_MS,
    DEAD_LETTER_MAXLEN,
    EVENTS_MAXLEN,
    INFERENCE_GROUP,
    INFERENCE_MAXLEN,
    INFERENCE_REPLY_TTL_S,
    SOLVER_GROUP,
    TICKET_RETENTION_S,
    Keys,
)
from .base import (
    MATCH_MAX_COUNT,
    MATCH_RETENTION_S,
    THROUGHPUT_WINDOW_S,
    Backfill,
    Conflict,
    MatchRecord,
    MatchResult,
    Store,
    StoreUnavailable,
    Ticket,
    WaitInputs,
    pool_of,
    rate_of,
)

log = logging.getLogger("mgmatch.store")

# Redis cannot answer now, but will: a 503 for the API, a back-off for a worker.
# On a cluster also: a failover in progress (ClusterError: CLUSTERDOWN, MASTERDOWN, redirections past the
# client's TTL), a slot without a node, no node reachable, a blocked read cut by a master's demotion (UNBLOCKED).
_UNAVAILABLE = (rex.ConnectionError, rex.TimeoutError, rex.ReadOnlyError, rex.ClusterError, rex.TryAgainError,
                rex.OutOfMemoryError, rex.SlotNotCoveredError, OSError)
_UNAVAILABLE_REPLIES = ("MISCONF", "MASTERDOWN", "LOADING", "READONLY", "TRYAGAIN", "CLUSTERDOWN", "UNBLOCKED")
_CLUSTER_UNREACHABLE = "Redis Cluster cannot be connected"
_CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}

# Blocking reads wait BLOCK_MS (1 s) and a predictor reply at most _MAX_REPLY_WAIT_S; the socket
# timeout stays above both. A broken connection is retried a few times, briefly (well under a
# second in all), so a Redis restart costs the callers in flight a short wait rather than an error.
_MAX_REPLY_WAIT_S = 8.0
# An async call (the API's ticket calls) gives up after this, retries included, and is StoreUnavailable:
# the request answers 503 with Retry-After at once rather than after the socket timeout and redis-py's
# retries (tens of seconds, past a game server's HTTP timeout) when a connection hangs in a failover.
CALL_TIMEOUT_S = 3.0
_RETRIES = 3
_CLIENT_OPTIONS: dict[str, Any] = {"decode_responses": True, "socket_timeout": 10, "socket_connect_timeout": 2,
                                   "health_check_interval": 5}
_REAP_BATCH = 500
_PLAYERS_SLICE = 64  # players-hash entries the reaper checks per round


def _backoff() -> ExponentialWithJitterBackoff:
    return ExponentialWithJitterBackoff(base=0.02, cap=0.25)


def _lua(name: str) -> str:
    """A script from ``lua/``, after the shared functions of ``lua/lib.lua``."""
    folder = resources.files(__package__).joinpath("lua")
    return folder.joinpath("lib.lua").read_text() + "\n" + folder.joinpath(f"{name}.lua").read_text()


SCRIPTS = ("create", "claim", "claim_job", "commit", "release", "takeover", "cancel", "expire_ticket", "release_crashed", "reap",
           "heartbeat", "alive", "backfill_create", "backfill_cancel", "backfill_fill", "backfill_reap",
           "match_result")
_SOURCES = {name: _lua(name) for name in SCRIPTS}


def cluster_node_url(url: str) -> str | None:
    """For a cluster URL (``redis+cluster://`` or ``rediss+cluster://``) the plain URL of its node
    (what redis-py's cluster clients take); None for any other URL."""
    scheme, sep, rest = url.partition("://")
    plain = _CLUSTER_SCHEMES.get(scheme.lower()) if sep else None
    return None if plain is None else f"{plain}://{rest}"


_CONNECTION_MODULES = tuple(os.path.join(os.path.dirname(redis.__file__), *parts)
                            for parts in (("connection.py",), ("asyncio", "connection.py")))


def _connection_race(err: Exception) -> bool:
    """A connection closed under a command by the client itself. redis-py's asyncio cluster client
    re-reads the topology when a failover moves a master and closes that node's connections, also
    one another coroutine is writing to: the writer fails inside redis-py's connection code with
    AttributeError (``'NoneType' object has no attribute 'writelines'``) or RuntimeError (``the
    handler is closed``). For the caller that is a connection lost, like ConnectionError."""
    if not isinstance(err, (AttributeError, RuntimeError)):
        return False
    tb = err.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename in _CONNECTION_MODULES:
            return True
        tb = tb.tb_next
    return False


def _unavailable(err: Exception) -> StoreUnavailable | None:
    """The StoreUnavailable an error of a Redis call means, or None when it is not about reaching Redis.
    A NOSCRIPT that survived redis-py's own reload-and-retry is one too: on a cluster the script was
    loaded by a client whose map of the masters was out of date during a failover; the next call loads
    it on the new master."""
    if (isinstance(err, _UNAVAILABLE)
            or (isinstance(err, rex.ResponseError) and str(err).startswith(_UNAVAILABLE_REPLIES))
            or isinstance(err, rex.NoScriptError)
            or (isinstance(err, rex.RedisClusterException) and str(err).startswith(_CLUSTER_UNREACHABLE))
            or _connection_race(err)):
        return StoreUnavailable(f"Redis unavailable: {type(err).__name__}: {err}")
    return None


_DEADLINE_LOG_EVERY_S = 10.0
_deadline_logged = [float("-inf")]


def _log_deadline(call: str, timeout_s: float) -> None:
    """A warning that an async call ran into its deadline, at most one every _DEADLINE_LOG_EVERY_S."""
    now = time.monotonic()
    if now - _deadline_logged[0] >= _DEADLINE_LOG_EVERY_S:
        _deadline_logged[0] = now
        log.warning("Redis gave %s no answer within %g s: answered 503 (more such calls are not logged for %g s)",
                    call, timeout_s, _DEADLINE_LOG_EVERY_S)


def _guard(fn):
    """Raise StoreUnavailable where Redis cannot answer now (sync and async methods)."""
    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def guarded_async(*args, **kwargs):
            try:
                async with asyncio.timeout(args[0].call_timeout_s):
                    return await fn(*args, **kwargs)
            except (*_UNAVAILABLE, rex.ResponseError, rex.RedisClusterException, AttributeError, RuntimeError) as err:
                if (out := _unavailable(err)) is None:
                    raise
                if type(err) is TimeoutError:  # the deadline (a socket's own timeout says so too)
                    out = StoreUnavailable(f"Redis unavailable: no answer within {args[0].call_timeout_s:g} s")
                    _log_deadline(fn.__name__, args[0].call_timeout_s)
                args[0]._drop_async_cluster()
                raise out from err
        return guarded_async

    @functools.wraps(fn)
    def guarded(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (*_UNAVAILABLE, rex.ResponseError, rex.RedisClusterException, AttributeError, RuntimeError) as err:
            if (out := _unavailable(err)) is None:
                raise
            raise out from err
    return guarded


def _guard_public(cls):
    """Apply :func:`_guard` to every public method the class defines (not ping/close/from_url)."""
    for name, attr in list(vars(cls).items()):
        if name.startswith("_") or name in ("ping", "close") or not inspect.isfunction(attr):
            continue
        setattr(cls, name, _guard(attr))
    return cls


_DROPPED_CLIENT_GRACE_S = 3.0
_CLOSING: set[asyncio.Task] = set()  # closes of dropped asyncio clients in flight (held until done)


async def _close_quietly(client: aiocluster.RedisCluster, grace_s: float = _DROPPED_CLIENT_GRACE_S) -> None:
    """Disconnect every node of a dropped asyncio cluster client. Its ``aclose()`` does nothing while
    the client is due to re-read the topology, which is the state a failure leaves it in. Commands
    already running on it get a moment to finish first (they may still re-read the topology)."""
    await asyncio.sleep(grace_s)
    for close in (client.aclose, lambda: client.nodes_manager.aclose("nodes_cache"),
                  lambda: client.nodes_manager.aclose("startup_nodes")):
        try:
            await close()
        except Exception:  # noqa: BLE001 - a client dropped because it failed may fail to close too
            log.debug("closing a dropped asyncio cluster client failed", exc_info=True)


def _is_cluster_pipeline(client) -> bool:
    return isinstance(client, (redis.cluster.ClusterPipeline, aiocluster.ClusterPipeline))


def _queue_script(pipe, script, kv: dict[str, list]):
    """Queue a script call on a cluster pipeline. redis-py refuses ``evalsha`` there (a cluster
    pipeline cannot load scripts first), so it gets the plain EVALSHA command, which goes to the
    node of its keys like any keyed command; a NOSCRIPT reply is the caller's to handle (load the
    script on every master, run the batch again: every script is safe to replay)."""
    return pipe.execute_command("EVALSHA", script.sha, len(kv["keys"]), *kv["keys"], *kv["args"])


class _LazyCluster:
    """A ``redis.cluster.RedisCluster`` built on its first command. redis-py's sync cluster client
    reads the cluster's topology when it is built, and a store must be buildable while the cluster
    is down (``serve`` and the workers start, then wait for it); until a node answers every command
    raises the client's "cannot be connected" error, which is StoreUnavailable."""

    def __init__(self, node_url: str, **options: Any):
        self._url, self._options = node_url, options
        self._client: redis.cluster.RedisCluster | None = None
        self._lock = threading.Lock()
        self._encoder = Encoder("utf-8", "strict", bool(options.get("decode_responses")))

    def _cluster(self) -> redis.cluster.RedisCluster:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = redis.cluster.RedisCluster.from_url(self._url, **self._options)
        return self._client

    def get_encoder(self) -> Encoder:
        """How scripts registered here hash their source (before any node was reached)."""
        return self._encoder

    def register_script(self, script: str) -> Script:
        return Script(self, script)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cluster(), name)


@_guard_public
class RedisStore(Store):
    """Production store. Thread-safe (redis-py pools connections)."""

    def __init__(self, client: redis.Redis, prefix: str = "mgm", url: str | None = None,
                 match_retention_s: float = MATCH_RETENTION_S, match_max_count: int = MATCH_MAX_COUNT,
                 call_timeout_s: float = CALL_TIMEOUT_S):
        self.match_retention_s, self.match_max_count = float(match_retention_s), int(match_max_count)
        # the deadline of an async (API) call, retries included: past it the call is StoreUnavailable (503)
        self.call_timeout_s = float(call_timeout_s)
        self.r = client
        self.keys = Keys(prefix)
        # the API's async hot path gets its own asyncio client per event loop (built lazily from the URL)
        self._url = url
        self._aio: tuple[asyncio.AbstractEventLoop, aioredis.Redis, dict[str, Any]] | None = None
        self._s = {name: client.register_script(src) for name, src in _SOURCES.items()}
        self._groups: set[tuple[str, str]] = set()

    @staticmethod
    def from_url(url: str, prefix: str = "mgm", match_retention_s: float = MATCH_RETENTION_S,
                 match_max_count: int = MATCH_MAX_COUNT, call_timeout_s: float = CALL_TIMEOUT_S) -> RedisStore:
        """A store on one Redis (``redis://``, ``rediss://``, ``unix://``) or a Redis Cluster
        (``redis+cluster://host:port``: any node of it)."""
        retry = Retry(_backoff(), _RETRIES)
        node_url = cluster_node_url(url)
        if node_url is not None:
            return RedisStore(_LazyCluster(node_url, retry=retry, **_CLIENT_OPTIONS), prefix, url=url,
                              match_retention_s=match_retention_s, match_max_count=match_max_count,
                              call_timeout_s=call_timeout_s)
        client = redis.Redis.from_url(url, retry=retry, **_CLIENT_OPTIONS)
        return RedisStore(client, prefix, url=url, match_retention_s=match_retention_s,
                          match_max_count=match_max_count, call_timeout_s=call_timeout_s)

    def _async(self) -> tuple[aioredis.Redis, dict[str, Any]] | None:
        """The asyncio client and scripts of the running loop (None: no URL, use threads)."""
        if self._url is None:
            return None
        loop = asyncio.get_running_loop()
        if self._aio is None or self._aio[0] is not loop:
            retry = AsyncRetry(_backoff(), _RETRIES)
            node_url = cluster_node_url(self._url)
            if node_url is not None:  # connects on its first command, not here
                client = aiocluster.RedisCluster.from_url(node_url, retry=retry, **_CLIENT_OPTIONS)
            else:
                client = aioredis.Redis.from_url(self._url, retry=retry, **_CLIENT_OPTIONS)
            scripts = {name: client.register_script(_SOURCES[name]) for name in ("create", "cancel")}
            self._aio = (loop, client, scripts)
        return self._aio[1], self._aio[2]

    def _drop_async_cluster(self) -> None:
        """Forget this loop's asyncio cluster client after a failure: redis-py hands a connection back
        to its pool whatever went wrong on it, so one whose write or read broke off in a failover may
        still owe a reply, which the next command on it would take for its own. The next call builds
        a fresh client (a few per failover); the old one is closed in the background."""
        if self._aio is not None and isinstance(self._aio[1], aiocluster.RedisCluster):
            old, self._aio = self._aio[1], None
            # every command still running on it ends by its deadline before the close
            grace = max(_DROPPED_CLIENT_GRACE_S, self.call_timeout_s)
            task = asyncio.get_running_loop().create_task(_close_quietly(old, grace))
            _CLOSING.add(task)
            task.add_done_callback(_CLOSING.discard)

    # ------------------------------------------------------------------ tickets

    def _pool_keys(self, pool: str) -> list[str]:
        k = self.keys
        return [k.queue(pool), k.expiry(pool), k.pending(pool)]

    def _ended_keys(self, pool: str) -> list[str]:
        """Keys a script needs to end a ticket: the indexes, the events stream, the players hash."""
        return [*self._pool_keys(pool), self.keys.events(pool), self.keys.players(pool)]

    def _create_kv(self, ticket: Ticket, idempotency_key: str | None) -> dict[str, list]:
        k, pool = self.keys, ticket.pool
        ttl_s = max(0.001, ticket.expires_at - ticket.created_at)
        idem_key = k.idempotency(pool, idempotency_key or "-")
        return {"keys": [idem_key, k.ticket(pool, ticket.id), k.queue(pool), k.expiry(pool), k.events(pool),
                         k.players(pool)],
                "args": [ticket.id, ticket.data_json(), repr(ttl_s), "1" if idempotency_key else "0",
                         TICKET_RETENTION_S, EVENTS_MAXLEN, k.ticket(pool, ""), *(p["id"] for p in ticket.players)]}

    def _create_call(self, ticket: Ticket, idempotency_key: str | None, client=None):
        kv = self._create_kv(ticket, idempotency_key)
        if _is_cluster_pipeline(client):
            return _queue_script(client, self._s["create"], kv)
        return self._s["create"](**kv, client=client)

    def create_many(self, items: list[tuple[Ticket, str | None]]) -> list[tuple[Ticket, bool] | Conflict]:
        """One round trip for the whole batch (a pipeline of the create script)."""
        try:
            replies = self._create_pipeline(items)
        except rex.NoScriptError:  # flushed between redis-py's SCRIPT EXISTS and the batch, or (a cluster's
            # pipelines load no scripts) a node that never ran it, a replica promoted: load it, once more
            self.r.script_load(_SOURCES["create"])
            replies = self._create_pipeline(items)  # (a create replayed for the same ticket is a no-op)
        out: list[tuple[Ticket, bool] | Conflict] = []
        for (t, _), prev in zip(items, replies, strict=True):
            try:
                out.append(self._created(t, prev))
            except Conflict as err:
                out.append(err)
        return out

    def _create_pipeline(self, items: list[tuple[Ticket, str | None]]) -> list:
        pipe = self.r.pipeline(transaction=False)
        for t, key in items:
            self._create_call(t, key, client=pipe)
        return pipe.execute()

    def create(self, ticket: Ticket, idempotency_key: str | None = None) -> tuple[Ticket, bool]:
        return self._created(ticket, self._create_call(ticket, idempotency_key))

    @staticmethod
    def _read_create(ticket: Ticket, prev: str) -> tuple[Ticket | None, str | None]:
        """Read the create script's reply: '+<created> <expires>' = created (the ticket with Redis's
        times); '!<pid> <tid>' = the player is already queued (raises Conflict); else the id of the
        ticket the idempotency key made earlier."""
        if prev.startswith("+"):
            created, expires = prev[1:].split(" ", 1)
            return dataclasses.replace(ticket, created_at=float(created), expires_at=float(expires)), None
        if prev.startswith("!"):
            pid, other = prev[1:].split(" ", 1)
            raise Conflict(f"player {pid!r} is already queued in ticket {other}")
        return None, prev

    def _created(self, ticket: Ticket, prev: str) -> tuple[Ticket, bool]:
        stored, earlier_id = self._read_create(ticket, prev)
        if stored is not None:
            return stored, True
        earlier = self.get(earlier_id)
        return (earlier, False) if earlier is not None else (ticket, True)

    async def _acreated(self, ticket: Ticket, prev: str) -> tuple[Ticket, bool]:
        stored, earlier_id = self._read_create(ticket, prev)
        if stored is not None:
            return stored, True
        earlier = await self.aget(earlier_id)
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
        try:
            prevs = await self._acreate_pipeline(aio, items)
        except rex.NoScriptError:  # as in create_many
            await aio[0].script_load(_SOURCES["create"])
            prevs = await self._acreate_pipeline(aio, items)
        out: list[tuple[Ticket, bool] | Conflict] = []
        for (t, _), prev in zip(items, prevs, strict=True):
            try:
                out.append(await self._acreated(t, prev))
            except Conflict as err:
                out.append(err)
        return out

    async def _acreate_pipeline(self, aio, items: list[tuple[Ticket, str | None]]) -> list:
        client, scripts = aio
        async with client.pipeline(transaction=False) as pipe:
            for t, key in items:
                kv = self._create_kv(t, key)
                if _is_cluster_pipeline(pipe):
                    _queue_script(pipe, scripts["create"], kv)
                else:
                    await scripts["create"](**kv, client=pipe)
            return await pipe.execute()

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

    def get_many(self, pool: str, ticket_ids: list[str]) -> list[Ticket | None]:
        if not ticket_ids:
            return []
        pipe = self.r.pipeline(transaction=False)
        for tid in ticket_ids:
            pipe.hgetall(self.keys.ticket(pool, tid))
        return [Ticket.from_fields(tid, f).view() if f else None
                for tid, f in zip(ticket_ids, pipe.execute(), strict=True)]

    def cancel(self, ticket_id: str) -> Ticket | None:
        pool = pool_of(ticket_id)
        if pool is None:
            return None
        out = self._s["cancel"](**self._cancel_kv(pool, ticket_id))
        return self.get(ticket_id) if self._cancelled(out) else None

    def _cancel_kv(self, pool: str, ticket_id: str) -> dict[str, list]:
        return {"keys": [*self._ended_keys(pool), self.keys.ticket(pool, ticket_id)], "args": [EVENTS_MAXLEN]}

    @staticmethod
    def _cancelled(out: str) -> bool:
        """Read the cancel script's reply: True = cancelled, False = no such ticket; else the ticket's
        status, which cannot be cancelled (raises Conflict)."""
        if out not in ("", "ok"):
            raise Conflict(f"ticket is {out}")
        return out == "ok"

    def queued(self, pool: str, limit: int = 10_000) -> list[Ticket]:
        ids = self.queued_ids(pool, limit)
        now = time.time()
        return [t for t in self.get_many(pool, ids) if t is not None and t.status == "queued" and t.expires_at > now]

    def queued_ids(self, pool: str, limit: int = 10_000) -> list[str]:
        if limit <= 0:
            return []
        return list(self.r.zrange(self.keys.queue(pool), 0, limit - 1))

    def queue_depth(self, pool: str) -> int:
        return int(self.r.zcard(self.keys.queue(pool)))

    def player_count(self, pool: str) -> int:
        """Entries of the pool's players hash (players with a live ticket, once the reaper caught up)."""
        return int(self.r.hlen(self.keys.players(pool)))

    @staticmethod
    def _duration(until: float) -> str:
        """A deadline on this host's clock as a duration, which the script adds to Redis TIME."""
        return repr(max(0.001, until - time.time()))

    def claim(self, pool: str, ticket_ids: list[str], match_id: str, lease_until: float) -> bool:
        if not ticket_ids:
            return False
        keys = [*self._pool_keys(pool), *(self.keys.ticket(pool, t) for t in ticket_ids)]
        return bool(self._s["claim"](keys=keys, args=[match_id, self._duration(lease_until), *ticket_ids]))

    def commit(self, pool: str, match_id: str, selected: list[str], unselected: list[str],
               result: MatchResult, record: MatchRecord | None = None) -> bool:
        keys = [*self._ended_keys(pool), *(self.keys.ticket(pool, t) for t in selected),
                *(self.keys.ticket(pool, t) for t in unselected)]
        results = [json.dumps(result.for_ticket(t)) for t in selected]
        args = [match_id, len(selected), *results, EVENTS_MAXLEN]
        if record is not None:
            keys += [self.keys.match(pool, record.match_id), self.keys.matches(pool)]
            args += [record.record_json(), repr(self.match_retention_s), self.match_max_count, record.match_id,
                     self.keys.match(pool, "")]
        return bool(self._s["commit"](keys=keys, args=args))

    def release(self, pool: str, match_id: str, ticket_ids: list[str]) -> int:
        if not ticket_ids:
            return 0
        keys = [*self._pool_keys(pool), *(self.keys.ticket(pool, t) for t in ticket_ids)]
        return int(self._s["release"](keys=keys, args=[match_id]))

    def takeover(self, pool: str, claim_id: str, new_id: str, ticket_ids: list[str], lease_until: float) -> int:
        if not ticket_ids:
            return 0
        keys = [*self._pool_keys(pool), *(self.keys.ticket(pool, t) for t in ticket_ids)]
        return int(self._s["takeover"](keys=keys, args=[claim_id, new_id, self._duration(lease_until)]))

    def expire_ticket(self, pool: str, ticket_id: str, claim_id: str, reason: str) -> bool:
        keys = [*self._ended_keys(pool), self.keys.ticket(pool, ticket_id)]
        return bool(self._s["expire_ticket"](keys=keys, args=[claim_id, reason, EVENTS_MAXLEN]))

    def release_crashed(self, pool: str, claim_id: str, ticket_ids: list[str], max_crashes: int,
                        reason: str) -> tuple[int, int]:
        """The tickets of a dead-lettered job (still proposed by the claim or a takeover of it): each
        counts one more crashed job; one at ``max_crashes`` ends expired with ``reason``, the others go
        back to the queue. Returns (requeued, expired)."""
        if not ticket_ids:
            return 0, 0
        keys = [*self._ended_keys(pool), *(self.keys.ticket(pool, t) for t in ticket_ids)]
        requeued, expired = self._s["release_crashed"](keys=keys, args=[claim_id, max_crashes, reason, EVENTS_MAXLEN])
        return int(requeued), int(expired)

    def reap(self, pool: str, now: float | None = None) -> tuple[int, int]:
        """One reaper round at Redis TIME (``now`` is ignored: the server's clock decides)."""
        k = self.keys
        expired, released = self._s["reap"](
            keys=[*self._ended_keys(pool), k.players_cursor(pool)],
            args=[k.ticket(pool, ""), _REAP_BATCH, EVENTS_MAXLEN, _PLAYERS_SLICE])
        return int(expired), int(released)

    def ping(self) -> bool:
        try:
            return bool(self.r.ping())
        except Exception:  # noqa: BLE001 - whatever the reason, the store is not ready
            return False

    def close(self) -> None:
        self.r.close()
        self._aio = None  # the asyncio client closes with its event loop

    # ------------------------------------------------------------------ streams and groups

    def ensure_group(self, stream: str, group: str) -> None:
        """Create the consumer group (and the stream) unless this process already did."""
        if (stream, group) in self._groups:
            return
        try:
            self.r.xgroup_create(stream, group, id="0", mkstream=True)
        except rex.ResponseError as err:
            if "BUSYGROUP" not in str(err):
                raise
        self._groups.add((stream, group))

    def _grouped(self, stream: str, group: str, call):
        """Run a group command; if the group vanished (Redis lost its data: FLUSHALL, a restart without
        persistence, a failover to an empty replica) create it again and run the command once more."""
        self.ensure_group(stream, group)
        try:
            return call()
        except rex.ResponseError as err:
            if "NOGROUP" not in str(err):
                raise
            log.warning("consumer group %s of %s is gone (Redis lost its data?): creating it again", group, stream)
            self._groups.discard((stream, group))
            self.ensure_group(stream, group)
            return call()

    # ------------------------------------------------------------------ solve jobs

    def claim_job(self, pool: str, ticket_ids: list[str], match_id: str, lease_until: float,
                  job: dict[str, Any]) -> bool:
        """:meth:`claim` and :meth:`publish_job` in one script: the tickets proposed under ``match_id`` and
        the job on the solvers' stream, or neither (False: a ticket is not free). With two calls, a
        matchmaker killed (or a failover) between them left the tickets proposed in a job no solver had
        until their lease ran out. A retry after a lost reply finds the claim held and publishes nothing."""
        if not ticket_ids:
            return False
        stream = self.keys.jobs(pool)
        self.ensure_group(stream, SOLVER_GROUP)
        keys = [*self._pool_keys(pool), stream, *(self.keys.ticket(pool, t) for t in ticket_ids)]
        out = self._s["claim_job"](keys=keys, args=[match_id, self._duration(lease_until), json.dumps(job),
                                                    *ticket_ids])
        return out not in (0, None)

    def publish_job(self, pool: str, job: dict[str, Any]) -> str:
        stream = self.keys.jobs(pool)
        self.ensure_group(stream, SOLVER_GROUP)
        return self.r.xadd(stream, {"job": json.dumps(job)})

    def read_jobs(self, pool: str, consumer: str, count: int = 1,
                  block_ms: int | None = BLOCK_MS) -> list[tuple[str, dict]]:
        stream = self.keys.jobs(pool)
        resp = self._grouped(stream, SOLVER_GROUP, lambda: self.r.xreadgroup(
            SOLVER_GROUP, consumer, {stream: ">"}, count=count, block=block_ms))
        return [(eid, json.loads(f["job"])) for _, entries in (resp or []) for eid, f in entries if f]

    def autoclaim_jobs(self, pool: str, consumer: str, min_idle_ms: int, count: int = 10) -> list[tuple[str, dict]]:
        """Take over jobs another solver read and never acknowledged (it crashed)."""
        stream = self.keys.jobs(pool)
        resp = self._grouped(stream, SOLVER_GROUP, lambda: self.r.xautoclaim(
            stream, SOLVER_GROUP, consumer, min_idle_time=min_idle_ms, start_id="0-0", count=count))
        entries = resp[1] if resp else []
        return [(eid, json.loads(f["job"])) for eid, f in entries if f]

    def job_deliveries(self, pool: str, entry_ids: list[str]) -> dict[str, int]:
        """How many times each pending job was delivered (read or taken over); absent = not pending."""
        if not entry_ids:
            return {}
        stream = self.keys.jobs(pool)

        def call():
            pipe = self.r.pipeline(transaction=False)
            for eid in entry_ids:
                pipe.xpending_range(stream, SOLVER_GROUP, min=eid, max=eid, count=1)
            return pipe.execute()

        rows = self._grouped(stream, SOLVER_GROUP, call)
        return {r[0]["message_id"]: int(r[0]["times_delivered"]) for r in rows if r}

    def ack_job(self, pool: str, entry_id: str) -> None:
        # acknowledged jobs are deleted: no MAXLEN trimming that could drop a pending entry
        stream = self.keys.jobs(pool)
        pipe = self.r.pipeline(transaction=False)
        pipe.xack(stream, SOLVER_GROUP, entry_id)
        pipe.xdel(stream, entry_id)
        pipe.execute()

    def dead_letter_job(self, pool: str, entry_id: str, job: dict[str, Any], reason: str, deliveries: int,
                        consumer: str) -> str:
        """Move a job to the pool's dead-letter stream and acknowledge and delete it, in one transaction."""
        stream = self.keys.jobs(pool)
        pipe = self.r.pipeline(transaction=True)
        pipe.xadd(self.keys.dead_letters(pool),
                  {"job": json.dumps(job), "reason": reason, "deliveries": deliveries, "entry": entry_id,
                   "consumer": consumer, "at": repr(time.time())},
                  maxlen=DEAD_LETTER_MAXLEN, approximate=True)
        pipe.xack(stream, SOLVER_GROUP, entry_id)
        pipe.xdel(stream, entry_id)
        return pipe.execute()[0]

    def dead_letters(self, pool: str, count: int = 100) -> list[tuple[str, dict[str, Any]]]:
        """The newest dead-lettered jobs of a pool, newest first: (entry id, fields with ``job`` parsed)."""
        out = []
        for eid, f in self.r.xrevrange(self.keys.dead_letters(pool), count=count):
            out.append((eid, {**f, "job": json.loads(f["job"]), "deliveries": int(f["deliveries"])}))
        return out

    def jobs_lag(self, pool: str) -> int:
        """Jobs waiting or in flight in the solver group (what a KEDA scaler reads)."""
        try:
            groups = self.r.xinfo_groups(self.keys.jobs(pool))
        except rex.ResponseError:
            return 0
        for g in groups:
            if g["name"] == SOLVER_GROUP:
                return int(g.get("lag") or 0) + int(g.get("pending") or 0)
        return 0

    # ------------------------------------------------------------------ inference requests

    def request_inference(self, requests: list[dict[str, Any]]) -> None:
        """Queue predictor requests (each with an ``id``); the stream is trimmed approximately."""
        pipe = self.r.pipeline(transaction=False)
        for req in requests:
            pipe.xadd(self.keys.inference_requests(), {"req": json.dumps(req)}, maxlen=INFERENCE_MAXLEN,
                      approximate=True)
        pipe.execute()

    def await_inference(self, request_id: str, timeout_s: float) -> dict[str, Any] | None:
        """The reply to one request, waiting at most ``timeout_s``; None when none came."""
        wait = min(_MAX_REPLY_WAIT_S, max(0.01, timeout_s))
        got = self.r.blpop([self.keys.inference_reply(request_id)], timeout=wait)
        return None if got is None else json.loads(got[1])

    def read_inference(self, consumer: str, count: int, block_ms: int | None = BLOCK_MS) -> list[tuple[str, dict]]:
        """New predictor requests for this inference worker (entries trimmed meanwhile are skipped)."""
        stream = self.keys.inference_requests()
        resp = self._grouped(stream, INFERENCE_GROUP, lambda: self.r.xreadgroup(
            INFERENCE_GROUP, consumer, {stream: ">"}, count=count, block=block_ms))
        return [(eid, json.loads(f["req"])) for _, es in (resp or []) for eid, f in es if f]

    def reply_inference(self, replies: dict[str, dict[str, Any]], entry_ids: list[str]) -> None:
        """Push each reply to its list (expiring), then acknowledge and delete the requests."""
        stream = self.keys.inference_requests()
        pipe = self.r.pipeline(transaction=False)
        for rid, reply in replies.items():
            key = self.keys.inference_reply(rid)
            pipe.rpush(key, json.dumps(reply))
            pipe.expire(key, INFERENCE_REPLY_TTL_S)
        if entry_ids:
            pipe.xack(stream, INFERENCE_GROUP, *entry_ids)
            pipe.xdel(stream, *entry_ids)
        pipe.execute()

    def drop_stale_inference(self, consumer: str, min_idle_ms: int, count: int = 100) -> int:
        """Acknowledge and delete requests a dead inference worker left pending for ``min_idle_ms``
        (longer than any solver waits for a reply). XAUTOCLAIM also drops pending references to
        entries the approximate trimming deleted, so the group's pending list cannot grow forever."""
        stream = self.keys.inference_requests()
        resp = self._grouped(stream, INFERENCE_GROUP, lambda: self.r.xautoclaim(
            stream, INFERENCE_GROUP, consumer, min_idle_time=min_idle_ms, start_id="0-0", count=count))
        ids = [eid for eid, _ in (resp[1] if resp else [])]
        if ids:
            self.reply_inference({}, ids)
        return len(ids) + (len(resp[2]) if resp and len(resp) > 2 else 0)

    # ------------------------------------------------------------------ liveness and leadership

    def heartbeat(self, kind: str, worker_id: str, ttl_s: int) -> None:
        """The worker is alive for ``ttl_s`` more seconds (of Redis TIME)."""
        self._s["heartbeat"](keys=[self.keys.workers(kind)], args=[worker_id, ttl_s])

    def forget_worker(self, kind: str, worker_id: str) -> None:
        self.r.zrem(self.keys.workers(kind), worker_id)

    def workers(self, kind: str) -> list[str]:
        """Live workers of a kind: one ZRANGEBYSCORE on the kind's set, O(log n + live workers)."""
        return list(self._s["alive"](keys=[self.keys.workers(kind)], args=[]))

    def acquire_leader(self, pool: str, worker_id: str, ttl_ms: int) -> bool:
        """One matchmaker loop per pool: take or renew the pool's leader key (taken afresh after a flush)."""
        key = self.keys.leader(pool)
        if self.r.set(key, worker_id, nx=True, px=ttl_ms):
            return True
        if self.r.get(key) == worker_id:
            self.r.pexpire(key, ttl_ms)
            return True
        return False

    # ------------------------------------------------------------------ backfills

    def create_backfill(self, backfill: Backfill) -> Backfill:
        k, pool = self.keys, backfill.pool
        ttl_s = max(0.001, backfill.expires_at - backfill.created_at)
        out = self._s["backfill_create"](keys=[k.backfill(pool, backfill.id), k.backfills(pool)],
                                         args=[backfill.id, backfill.data_json(), repr(ttl_s), TICKET_RETENTION_S])
        created, expires = out.split(" ", 1)
        return dataclasses.replace(backfill, created_at=float(created), expires_at=float(expires),
                                   assigned=[[] for _ in backfill.teams])

    def get_backfill(self, backfill_id: str) -> Backfill | None:
        pool = pool_of(backfill_id)
        if pool is None:
            return None
        f = self.r.hgetall(self.keys.backfill(pool, backfill_id))
        return Backfill.from_fields(backfill_id, f).view() if f else None

    def cancel_backfill(self, backfill_id: str) -> Backfill | None:
        pool = pool_of(backfill_id)
        if pool is None:
            return None
        out = self._s["backfill_cancel"](keys=[self.keys.backfill(pool, backfill_id), self.keys.backfills(pool)],
                                         args=[])
        if out not in ("", "ok"):
            raise Conflict(f"backfill is {out}")
        return self.get_backfill(backfill_id) if out == "ok" else None

    def open_backfills(self, pool: str, limit: int = 100) -> list[Backfill]:
        if limit <= 0:
            return []
        ids = list(self.r.zrange(self.keys.backfills(pool), 0, limit - 1))
        if not ids:
            return []
        pipe = self.r.pipeline(transaction=False)
        for bid in ids:
            pipe.hgetall(self.keys.backfill(pool, bid))
        out = [Backfill.from_fields(bid, f).view() for bid, f in zip(ids, pipe.execute(), strict=True) if f]
        return [b for b in out if b.status == "open"]

    def fill_backfill(self, pool: str, backfill_id: str, ticket_ids: list[str], assigned: list[list[str]],
                      results: dict[str, dict[str, Any]]) -> bool:
        k = self.keys
        keys = [*self._ended_keys(pool), k.backfills(pool), k.backfill(pool, backfill_id),
                *(k.ticket(pool, t) for t in ticket_ids)]
        args = [json.dumps(assigned), json.dumps(list(ticket_ids)), EVENTS_MAXLEN,
                *(json.dumps(results[t]) for t in ticket_ids)]
        return bool(self._s["backfill_fill"](keys=keys, args=args))

    def reap_backfills(self, pool: str, now: float | None = None) -> int:
        """Expire open backfills past their TTL at Redis TIME (``now`` is ignored)."""
        return int(self._s["backfill_reap"](keys=[self.keys.backfills(pool)],
                                            args=[self.keys.backfill(pool, ""), _REAP_BATCH]))
    # ------------------------------------------------------------------ match records

    def get_match(self, pool: str, match_id: str) -> MatchRecord | None:
        f = self.r.hgetall(self.keys.match(pool, match_id))
        return MatchRecord.from_fields(f) if f.get("record") else None

    def put_match_result(self, pool: str, match_id: str, result: dict[str, Any]) -> tuple[MatchRecord | None, bool]:
        out = self._s["match_result"](keys=[self.keys.match(pool, match_id)],
                                      args=[json.dumps(result, allow_nan=False)])
        if not out or not out[1]:
            return None, False
        stored, record, at, res, res_at = (list(out) + [None] * 5)[:5]
        fields = {"record": record, "time": at, "result": res or "", "result_at": res_at or ""}
        return MatchRecord.from_fields(fields), bool(int(stored))

    def match_index(self, pool: str, min_time: float, limit: int) -> list[tuple[str, float]]:
        if limit <= 0:
            return []
        low = "-inf" if min_time == float("-inf") else repr(float(min_time))
        rows = self.r.zrangebyscore(self.keys.matches(pool), low, "+inf", start=0, num=limit, withscores=True)
        return [(mid, float(score)) for mid, score in rows]

    def get_matches(self, pool: str, match_ids: list[str]) -> list[MatchRecord | None]:
        if not match_ids:
            return []
        pipe = self.r.pipeline(transaction=False)
        for mid in match_ids:
            pipe.hgetall(self.keys.match(pool, mid))
        return [MatchRecord.from_fields(f) if f.get("record") else None for f in pipe.execute()]

    # ------------------------------------------------------------------ wait estimates and unmatched reasons

    def _script(self, name: str):
        """A script of ``lua/`` registered on first use (the wait-estimate scripts)."""
        if name not in self._s:
            self._s[name] = self.r.register_script(_lua(name))
        return self._s[name]

    def record_matched(self, pool: str, players: int, now: float | None = None) -> None:
        """One committed match at Redis TIME (``now`` is ignored: the server's clock decides)."""
        self._script("record_matched")(keys=[self.keys.throughput(pool)], args=[int(players), THROUGHPUT_WINDOW_S])

    def _wait_kv(self, pool: str, ticket_id: str) -> dict[str, list]:
        k = self.keys
        return {"keys": [k.queue(pool), k.pending(pool), k.players(pool), k.throughput(pool)],
                "args": [ticket_id]}

    @staticmethod
    def _wait_reply(out: list) -> WaitInputs:
        rank, depth, pending, players, now, flat = out
        samples = [(int(flat[i]), int(flat[i + 1])) for i in range(0, len(flat), 2)]
        rank = int(rank)
        return WaitInputs(rank if rank >= 0 else None, int(depth), int(players), int(depth) + int(pending),
                          rate_of(samples, float(now)), float(now))

    def wait_inputs(self, pool: str, ticket_id: str) -> WaitInputs:
        return self._wait_reply(self._script("wait_inputs")(**self._wait_kv(pool, ticket_id)))

    async def await_inputs(self, pool: str, ticket_id: str) -> WaitInputs:
        aio = self._async()
        if aio is None:
            return await anyio.to_thread.run_sync(self.wait_inputs, pool, ticket_id)
        client, scripts = aio
        if "wait_inputs" not in scripts:
            scripts["wait_inputs"] = client.register_script(_lua("wait_inputs"))
        return self._wait_reply(await scripts["wait_inputs"](**self._wait_kv(pool, ticket_id)))

    def set_unmatched_reason(self, pool: str, ticket_id: str, reason: str | None) -> bool:
        return bool(self._script("unmatched")(keys=[self.keys.ticket(pool, ticket_id)], args=[reason or ""]))
