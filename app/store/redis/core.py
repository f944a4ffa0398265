"""The Redis store's shared part: the client (one server or a cluster), the key schema, the Lua
scripts, the asyncio client of the API's hot path, consumer groups, and the key lists that several
concerns' scripts take. Each concern's module subclasses :class:`RedisCore`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from importlib import resources
from typing import Any, Self

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

from ...keys import Keys
from ..base import MATCH_MAX_COUNT, MATCH_RETENTION_S
from .errors import _guard_public

log = logging.getLogger("mgmatch.store")

_CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}

# An async call (the API's ticket calls) gives up after this, retries included, and is StoreUnavailable:
# the request answers 503 with Retry-After at once rather than after the socket timeout and redis-py's
# retries (tens of seconds, past a game server's HTTP timeout) when a connection hangs in a failover.
CALL_TIMEOUT_S = 3.0
# Blocking reads wait BLOCK_MS (1 s) and a predictor reply at most inference._MAX_REPLY_WAIT_S; the socket
# timeout stays above both. A broken connection is retried a few times, briefly (well under a
# second in all), so a Redis restart costs the callers in flight a short wait rather than an error.
_RETRIES = 3
_CLIENT_OPTIONS: dict[str, Any] = {"decode_responses": True, "socket_timeout": 10, "socket_connect_timeout": 2,
                                   "health_check_interval": 5}
_REAP_BATCH = 500  # entries a reaper script (tickets, backfills) handles per call


def _backoff() -> ExponentialWithJitterBackoff:
    return ExponentialWithJitterBackoff(base=0.02, cap=0.25)


def _lua(name: str) -> str:
    """A script from ``lua/``, after the shared functions of ``lua/lib.lua``."""
    folder = resources.files(__package__.rpartition(".")[0]).joinpath("lua")  # app/store/lua
    return folder.joinpath("lib.lua").read_text() + "\n" + folder.joinpath(f"{name}.lua").read_text()


SCRIPTS = ("create", "claim", "claim_job", "commit", "release", "takeover", "cancel", "expire_ticket", "release_crashed", "reap",
           "heartbeat", "alive", "backfill_create", "backfill_cancel", "backfill_fill", "backfill_reap",
           "match_result", "player_lock", "player_unlock", "ticket_live", "rate_match")
_SOURCES = {name: _lua(name) for name in SCRIPTS}


def cluster_node_url(url: str) -> str | None:
    """For a cluster URL (``redis+cluster://`` or ``rediss+cluster://``) the plain URL of its node
    (what redis-py's cluster clients take); None for any other URL."""
    scheme, sep, rest = url.partition("://")
    plain = _CLUSTER_SCHEMES.get(scheme.lower()) if sep else None
    return None if plain is None else f"{plain}://{rest}"



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


def _queue_script(pipe, script, kv: dict[str, list]):
    """Queue a script call on a pipeline as the plain EVALSHA command. redis-py refuses ``evalsha`` on a
    cluster pipeline (it cannot load scripts first), where the command goes to the node of its keys like
    any keyed command; on one Redis its script objects would send a SCRIPT EXISTS round trip before
    every pipeline. A NOSCRIPT reply is the caller's to handle (load the script, on every master of a
    cluster, and run the batch again: every script queued this way is safe to replay)."""
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
class RedisCore:
    """The client, keys and scripts every concern uses. Thread-safe (redis-py pools connections)."""

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

    @classmethod
    def from_url(cls, url: str, prefix: str = "mgm", match_retention_s: float = MATCH_RETENTION_S,
                 match_max_count: int = MATCH_MAX_COUNT, call_timeout_s: float = CALL_TIMEOUT_S) -> Self:
        """A store on one Redis (``redis://``, ``rediss://``, ``unix://``) or a Redis Cluster
        (``redis+cluster://host:port``: any node of it)."""
        retry = Retry(_backoff(), _RETRIES)
        node_url = cluster_node_url(url)
        if node_url is not None:
            return cls(_LazyCluster(node_url, retry=retry, **_CLIENT_OPTIONS), prefix, url=url,
                       match_retention_s=match_retention_s, match_max_count=match_max_count,
                       call_timeout_s=call_timeout_s)
        client = redis.Redis.from_url(url, retry=retry, **_CLIENT_OPTIONS)
        return cls(client, prefix, url=url, match_retention_s=match_retention_s,
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
            scripts = {name: client.register_script(_SOURCES[name]) for name in ("create", "cancel", "player_lock", "player_unlock", "ticket_live", "rate_match")}
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

    def _pool_keys(self, pool: str) -> list[str]:
        k = self.keys
        return [k.queue(pool), k.expiry(pool), k.pending(pool)]

    def _ended_keys(self, pool: str) -> list[str]:
        """Keys a script needs to end a ticket: the indexes, the events stream, the players hash."""
        return [*self._pool_keys(pool), self.keys.events(pool), self.keys.players(pool)]

    @staticmethod
    def _duration(until: float) -> str:
        """A deadline on this host's clock as a duration, which the script adds to Redis TIME."""
        return repr(max(0.001, until - time.time()))

    def _script(self, name: str):
        """A script of ``lua/`` registered on first use (the wait-estimate scripts)."""
        if name not in self._s:
            self._s[name] = self.r.register_script(_lua(name))
        return self._s[name]

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

