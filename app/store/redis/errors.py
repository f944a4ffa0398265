"""Which Redis errors mean "cannot answer now", and the guard that turns them into StoreUnavailable.

Every public method of the Redis store turns a Redis that cannot answer now (connection refused or
reset, timeout, loading its data, read-only or without master during a failover, out of memory,
refusing writes after a failed save) into :class:`~mgmatch.app.store.base.StoreUnavailable`; each
concern's class is wrapped by :func:`_guard_public`. An async call also has a deadline
(``call_timeout_s``), past which it is StoreUnavailable.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import os
import time

import redis
import redis.exceptions as rex

from ..base import StoreUnavailable

log = logging.getLogger("mgmatch.store")

# Redis cannot answer now, but will: a 503 for the API, a back-off for a worker.
# On a cluster also: a failover in progress (ClusterError: CLUSTERDOWN, MASTERDOWN, redirections past the
# client's TTL), a slot without a node, no node reachable, a blocked read cut by a master's demotion (UNBLOCKED).
_UNAVAILABLE = (rex.ConnectionError, rex.TimeoutError, rex.ReadOnlyError, rex.ClusterError, rex.TryAgainError,
                rex.OutOfMemoryError, rex.SlotNotCoveredError, OSError)
_UNAVAILABLE_REPLIES = ("MISCONF", "MASTERDOWN", "LOADING", "READONLY", "TRYAGAIN", "CLUSTERDOWN", "UNBLOCKED")
_CLUSTER_UNREACHABLE = "Redis Cluster cannot be connected"
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

