"""Every Redis key, stream, group and expiry of the service, each with its reason.

All keys of one pool carry the hash tag ``{pool}``: a pool lives on one Redis Cluster shard, so
the Lua scripts that touch several of its keys run there atomically, and pools spread over shards.
"""

from __future__ import annotations

from dataclasses import dataclass

# A finished ticket stays readable this long after its TTL, so a game server polling late still
# sees matched/expired/cancelled instead of 404.
TICKET_RETENTION_S = 3600
# The events stream keeps about this many entries (approximate trimming; events are never pending).
EVENTS_MAXLEN = 100_000
# Consumer group of the solver workers on a pool's jobs stream.
SOLVER_GROUP = "solvers"
# Consumer group of the inference workers on the inference request stream.
INFERENCE_GROUP = "inference"
# An inference reply is kept this long for a late reader, then dropped.
INFERENCE_REPLY_TTL_S = 30
# A worker heartbeat key lives this long; a worker that stops refreshing it drops off readiness.
HEARTBEAT_TTL_S = 15
# Blocking stream reads wait at most this long (below redis-py's socket timeout, see RedisStore).
BLOCK_MS = 1000


@dataclass(frozen=True)
class Keys:
    """Key names under one deployment prefix (``MGMATCH_KEY_PREFIX``)."""

    prefix: str = "mgm"

    def _pool(self, pool: str) -> str:
        return f"{self.prefix}:{{{pool}}}"

    def ticket(self, pool: str, ticket_id: str) -> str:
        """HASH: id, data (immutable JSON), status, created, expires, match_id, lease, result."""
        return f"{self._pool(pool)}:t:{ticket_id}"

    def queue(self, pool: str) -> str:
        """ZSET of queued ticket ids scored by creation time (longest waiting first)."""
        return f"{self._pool(pool)}:queue"

    def expiry(self, pool: str) -> str:
        """ZSET of queued ticket ids scored by their TTL deadline (for the reaper)."""
        return f"{self._pool(pool)}:expiry"

    def pending(self, pool: str) -> str:
        """ZSET of proposed ticket ids scored by their lease deadline (Open Match's pending list)."""
        return f"{self._pool(pool)}:pending"

    def idempotency(self, pool: str, key: str) -> str:
        """STRING → ticket id; expires with the ticket's TTL."""
        return f"{self._pool(pool)}:idem:{key}"

    def players(self, pool: str) -> str:
        """HASH player id → ticket id of its live ticket: a player queues at most once per pool."""
        return f"{self._pool(pool)}:players"

    def events(self, pool: str) -> str:
        """STREAM of ticket events (created, matched, cancelled, expired) for consumers downstream."""
        return f"{self._pool(pool)}:events"

    def jobs(self, pool: str) -> str:
        """STREAM of solve jobs from the matchmaker to the solver workers (group ``solvers``)."""
        return f"{self._pool(pool)}:jobs"

    def leader(self, pool: str) -> str:
        """STRING: the matchmaker that owns the pool (SET NX PX); one matchmaker loop per pool."""
        return f"{self._pool(pool)}:leader"

    def inference_requests(self) -> str:
        """STREAM of predictor requests (group ``inference``); not pool-bound, its own shard."""
        return f"{self.prefix}:{{infer}}:req"

    def inference_reply(self, request_id: str) -> str:
        """LIST with one reply, popped by the waiting solver (BLPOP); expires after INFERENCE_REPLY_TTL_S."""
        return f"{self.prefix}:{{infer}}:resp:{request_id}"

    def heartbeat(self, kind: str, worker_id: str) -> str:
        """STRING with a short TTL: the worker is alive."""
        return f"{self.prefix}:workers:{kind}:{worker_id}"

    def heartbeat_pattern(self, kind: str) -> str:
        return f"{self.prefix}:workers:{kind}:*"
