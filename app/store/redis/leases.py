"""Worker liveness and pool leadership in Redis (:class:`~mgmatch.app.store.protocols.LeaseStore`): a
sorted set of heartbeat deadlines per worker kind, a ``SET NX PX`` leader key per pool."""

from __future__ import annotations

from ..protocols import LeaseStore
from .core import RedisCore
from .errors import _guard_public


@_guard_public
class RedisLeases(RedisCore, LeaseStore):
    """Heartbeats and leader keys, on Redis TIME."""

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
