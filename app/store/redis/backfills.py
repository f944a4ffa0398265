"""Backfills in Redis (:class:`~mgmatch.app.store.protocols.BackfillStore`): a hash per backfill, a
sorted set of the pool's open ones by deadline; the fill is one script with the tickets it matches."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from ...keys import EVENTS_MAXLEN, TICKET_RETENTION_S
from ..base import Backfill, Conflict, pool_of
from ..protocols import BackfillStore
from .core import _REAP_BATCH, RedisCore
from .errors import _guard_public


@_guard_public
class RedisBackfills(RedisCore, BackfillStore):
    """Open slots of running matches, on the pool's shard."""

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
