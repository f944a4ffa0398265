"""Ready checks in Redis (:class:`~mgmatch.app.store.protocols.ReadyCheckStore`): a hash per check and an
index of the pool's pending checks by deadline, in the pool's slot; each step one script."""

from __future__ import annotations

import json
from typing import Any

from ...keys import EVENTS_MAXLEN, TICKET_RETENTION_S
from ..base import MatchRecord, MatchResult
from ..protocols import ReadyCheckStore
from .core import _REAP_BATCH, RedisCore
from .errors import _guard_public


@_guard_public
class RedisChecks(RedisCore, ReadyCheckStore):
    """Ready checks; the tickets' steps run with the check in one script on the pool's shard."""

    def propose_match(self, pool: str, claim_id: str, selected: list[str], result: MatchResult,
                      record: MatchRecord | None, deadline: float) -> bool:
        if not selected:
            return False
        k = self.keys
        tickets = self.get_many(pool, selected)
        owners = sorted({t.owner for t in tickets if t is not None and t.owner is not None})
        players = {p["id"]: t.id for t in tickets if t is not None for p in t.players}
        results = []
        for tid in selected:
            r = result.for_ticket(tid)
            r.pop("matched_at", None)
            results.append(json.dumps(r))
        keys = [*self._pool_keys(pool), k.events(pool), k.check(pool, result.match_id), k.checks(pool),
                *(k.ticket(pool, t) for t in selected)]
        args = [claim_id, result.match_id, self._duration(deadline), EVENTS_MAXLEN,
                record.record_json() if record is not None else "", json.dumps(owners), json.dumps(players),
                json.dumps(selected), TICKET_RETENTION_S, *results]
        return bool(self._script("ready_propose")(keys=keys, args=args))

    def _check_keys(self, pool: str, check_key: str, match_id: str) -> list[str]:
        k = self.keys
        return [*self._ended_keys(pool), k.checks(pool), check_key, k.match(pool, match_id), k.matches(pool),
                k.allocations(pool)]

    def answer_check(self, pool: str, match_id: str, player_id: str, accept: bool,
                     owner: str | None = None, allocate: bool = False) -> str:
        k = self.keys
        keys = self._check_keys(pool, k.check(pool, match_id), match_id)
        args = ["answer", k.ticket(pool, ""), EVENTS_MAXLEN, k.check(pool, ""), match_id, player_id,
                "1" if accept else "0", owner or "", repr(self.match_retention_s), self.match_max_count,
                k.match(pool, ""), "1" if allocate else "0"]
        return str(self._script("ready_check")(keys=keys, args=args))

    def take_allocations(self, pool: str, lease_s: float, limit: int = 16) -> list[dict[str, Any]]:
        """At Redis TIME."""
        k = self.keys
        keys = self._check_keys(pool, k.checks(pool), "-")
        args = ["take", k.ticket(pool, ""), EVENTS_MAXLEN, k.check(pool, ""), repr(float(lease_s)), int(limit)]
        return [{**json.loads(x), "pool": pool} for x in self._script("ready_check")(keys=keys, args=args)]

    def finish_allocation(self, pool: str, match_id: str, assignment: dict[str, Any] | None, reason: str = "") -> str:
        k = self.keys
        keys = self._check_keys(pool, k.check(pool, match_id), match_id)
        args = ["finish", k.ticket(pool, ""), EVENTS_MAXLEN, k.check(pool, ""), match_id,
                json.dumps(assignment) if assignment is not None else "", reason, repr(self.match_retention_s),
                self.match_max_count, k.match(pool, "")]
        return str(self._script("ready_check")(keys=keys, args=args))

    def reap_checks(self, pool: str, now: float | None = None) -> int:
        """One round at Redis TIME (``now`` is ignored: the server's clock decides)."""
        k = self.keys
        keys = self._check_keys(pool, k.checks(pool), "-")
        args = ["reap", k.ticket(pool, ""), EVENTS_MAXLEN, k.check(pool, ""), _REAP_BATCH]
        return int(self._script("ready_check")(keys=keys, args=args))
