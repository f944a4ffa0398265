"""The Redis store: tickets as hashes with expiry, Lua scripts for every multi-key change, streams.

One module per concern, each a subclass of :class:`~.core.RedisCore` (the client, the key schema of
:mod:`mgmatch.app.keys`, the scripts) implementing one protocol of :mod:`mgmatch.app.store.protocols`:
:mod:`.tickets`, :mod:`.records`, :mod:`.backfills`, :mod:`.stats`, :mod:`.jobs`, :mod:`.inference`,
:mod:`.leases`; :mod:`.errors` says which failures are an outage. :class:`RedisStore` is all of them
on one client. Each concern class also works alone (``RedisRecords.from_url(url)``).

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

from ..protocols import Store
from .backfills import RedisBackfills
from .checks import RedisChecks
from .core import (
    _CLIENT_OPTIONS,
    _SOURCES,
    CALL_TIMEOUT_S,
    SCRIPTS,
    RedisCore,
    _LazyCluster,
    _lua,
    cluster_node_url,
)
from .errors import _CONNECTION_MODULES, _UNAVAILABLE, _guard, _unavailable
from .inference import RedisInference
from .jobs import RedisJobs
from .leases import RedisLeases
from .ratings import RedisRatings
from .records import RedisRecords
from .stats import RedisStats
from .tickets import RedisTickets

__all__ = ["CALL_TIMEOUT_S", "SCRIPTS", "_CLIENT_OPTIONS", "_CONNECTION_MODULES", "_SOURCES", "_UNAVAILABLE",
           "RedisBackfills", "RedisChecks", "RedisCore", "RedisInference", "RedisJobs", "RedisLeases", "RedisRatings", "RedisRecords",
           "RedisStats", "RedisStore", "RedisTickets", "_LazyCluster", "_guard", "_lua", "_unavailable",
           "cluster_node_url"]


class RedisStore(RedisTickets, RedisRecords, RedisBackfills, RedisStats, RedisRatings, RedisChecks, RedisJobs,
                 RedisInference, RedisLeases, Store):
    """Production store: every concern on one client and key prefix. Thread-safe (redis-py pools
    connections)."""
