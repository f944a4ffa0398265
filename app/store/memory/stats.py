"""Wait statistics and unmatched reasons in memory (:class:`~mgmatch.app.store.protocols.StatsStore`)."""

from __future__ import annotations

import math

from ..base import THROUGHPUT_WINDOW_S, WaitInputs, rate_of
from ..protocols import StatsStore
from .core import MemoryCore


class MemoryStats(MemoryCore, StatsStore):
    """The pools' throughput per whole second, and what a wait estimate reads of the queue."""

    def record_matched(self, pool: str, players: int, now: float | None = None) -> None:
        now = self._clock() if now is None else now
        with self._lock:
            buckets = self._matched.setdefault(pool, {})
            second = math.floor(now)
            buckets[second] = buckets.get(second, 0) + int(players)
            if len(buckets) > THROUGHPUT_WINDOW_S + 2:
                for s in [s for s in buckets if s + 1 < now - THROUGHPUT_WINDOW_S]:
                    del buckets[s]

    def wait_inputs(self, pool: str, ticket_id: str) -> WaitInputs:
        now = self._clock()
        with self._lock:
            t = self._t.get(ticket_id)
            queue = self._queues.get(pool, ())
            rank = None
            if t is not None and t.pool == pool and t.status == "queued":
                i = queue.bisect_left((t.created_at, t.id))
                rank = i if i < len(queue) and queue[i] == (t.created_at, t.id) else None
            live_players = sum(1 for k in self._players if k[0] == pool)
            live_tickets = len(queue) + len(self._pending.get(pool, ()))
            rate = rate_of(list(self._matched.get(pool, {}).items()), now)
        return WaitInputs(rank, len(queue), live_players, live_tickets, rate, now)

    def set_unmatched_reason(self, pool: str, ticket_id: str, reason: str | None) -> bool:
        with self._lock:
            t = self._t.get(ticket_id)
            if t is None or t.pool != pool or t.status not in ("queued", "proposed"):
                return False
            t.unmatched_reason = reason
            return True
