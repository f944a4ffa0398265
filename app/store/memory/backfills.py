"""Backfills in memory (:class:`~mgmatch.app.store.protocols.BackfillStore`)."""

from __future__ import annotations

from typing import Any

from ..base import RETENTION_S, Backfill, Conflict
from ..protocols import BackfillStore
from .core import MemoryCore


class MemoryBackfills(MemoryCore, BackfillStore):
    """Open slots of running matches; a fill matches queued tickets under the store's one lock."""

    def create_backfill(self, backfill: Backfill) -> Backfill:
        with self._lock:
            if not backfill.assigned:
                backfill.assigned = [[] for _ in backfill.teams]
            self._backfills[backfill.id] = backfill
            self._open_bf.setdefault(backfill.pool, set()).add(backfill.id)
            return backfill

    def get_backfill(self, backfill_id: str) -> Backfill | None:
        with self._lock:
            b = self._backfills.get(backfill_id)
            if b is None or self._clock() > b.expires_at + RETENTION_S:
                return None
            return b.view()

    def cancel_backfill(self, backfill_id: str) -> Backfill | None:
        with self._lock:
            b = self._backfills.get(backfill_id)
            if b is None:
                return None
            v = b.view()
            if v.status != "open":
                raise Conflict(f"backfill is {v.status}")
            b.status = "cancelled"
            self._open_bf.get(b.pool, set()).discard(b.id)
            return b

    def open_backfills(self, pool: str, limit: int = 100) -> list[Backfill]:
        now = self._clock()
        with self._lock:
            live = [b for bid in self._open_bf.get(pool, ()) if (b := self._backfills[bid]).expires_at > now]
        return sorted(live, key=lambda b: (b.expires_at, b.id))[:limit]

    def fill_backfill(self, pool: str, backfill_id: str, ticket_ids: list[str], assigned: list[list[str]],
                      results: dict[str, dict[str, Any]]) -> bool:
        now = self._clock()
        with self._lock:
            b = self._backfills.get(backfill_id)
            if b is None or b.pool != pool:
                return False
            if b.status == "filled" and b.tickets == list(ticket_ids):
                return True  # the same fill again
            if b.status != "open" or b.expires_at <= now or not ticket_ids:
                return False
            if not self._all_queued(pool, ticket_ids, now):
                return False
            for tid in ticket_ids:
                t = self._t[tid]
                self._dequeue(t)
                t.status, t.match_id, t.lease_until, t.result = "matched", None, None, results[tid]
                self._free_players(t)
                self._event("matched", t, match_id=b.match_id, backfill=b.id)
            b.status, b.assigned, b.tickets, b.filled_at = "filled", [list(a) for a in assigned], list(ticket_ids), now
            self._open_bf.get(pool, set()).discard(b.id)
            return True

    def reap_backfills(self, pool: str, now: float | None = None) -> int:
        now = self._clock() if now is None else now
        n = 0
        with self._lock:
            for bid in list(self._open_bf.get(pool, ())):
                b = self._backfills[bid]
                if b.expires_at <= now:
                    b.status = "expired"
                    self._open_bf[pool].discard(bid)
                    n += 1
            if len(self._backfills) > 1000:
                for bid in [k for k, b in self._backfills.items() if b.expires_at + RETENTION_S < now]:
                    self._open_bf.get(self._backfills.pop(bid).pool, set()).discard(bid)
        return n
