"""Ready checks in memory (:class:`~mgmatch.app.store.protocols.ReadyCheckStore`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..base import MatchRecord, MatchResult, Ticket
from ..protocols import ReadyCheckStore
from .core import MemoryCore

TIMEOUT_REASON = "ready check timed out: a player did not accept"


@dataclass
class _Check:
    pool: str
    tickets: list[str]
    player_ticket: dict[str, str]
    deadline: float
    record: MatchRecord | None
    owners: set[str]
    accepted: set[str] = field(default_factory=set)
    status: str = "pending"
    ended_at: float = 0.0
    alloc_until: float = 0.0  # while allocating: when another matchmaker may take the allocation over


class MemoryChecks(MemoryCore, ReadyCheckStore):
    """The pools' ready checks, under the store's lock."""

    def _in_check(self, t: Ticket | None, match_id: str) -> bool:
        return t is not None and t.status == "proposed" and t.match_id == match_id

    def propose_match(self, pool: str, claim_id: str, selected: list[str], result: MatchResult,
                      record: MatchRecord | None, deadline: float) -> bool:
        with self._lock:
            if not selected or not all(self._in_check(self._t.get(tid), claim_id) for tid in selected):
                for tid in selected:
                    t = self._t.get(tid)
                    if self._in_check(t, claim_id):
                        self._requeue(pool, t)
                return False
            owners = set()
            players: dict[str, str] = {}
            for tid in selected:
                t = self._t[tid]
                t.match_id, t.lease_until = result.match_id, deadline
                t.result = {**result.for_ticket(tid), "accept_deadline": deadline}
                t.result.pop("matched_at", None)
                self._pending.get(pool, set()).discard(tid)
                players.update((p["id"], tid) for p in t.players)
                if t.owner is not None:
                    owners.add(t.owner)
                self._event("proposed", t, match_id=result.match_id)
            self._checks[(pool, result.match_id)] = _Check(pool, list(selected), players, deadline, record, owners)
            return True

    def answer_check(self, pool: str, match_id: str, player_id: str, accept: bool,
                     owner: str | None = None, allocate: bool = False) -> str:
        with self._lock:
            c = self._checks.get((pool, match_id))
            if c is None or player_id not in c.player_ticket or (owner is not None and owner not in c.owners):
                return "unknown"
            if c.status != "pending":
                return c.status
            if c.deadline <= self._clock():
                self._end_check(c, match_id, timed_out=True)
                return c.status
            if not accept:
                self._end_check(c, match_id, decliner=c.player_ticket[player_id])
                return c.status
            c.accepted.add(player_id)
            if len(c.accepted) < len(c.player_ticket):
                return "pending"
            if not all(self._in_check(self._t.get(tid), match_id) for tid in c.tickets):  # one was cancelled
                self._end_check(c, match_id)
                return c.status
            if allocate:  # confirmed: the tickets stay proposed until the allocator answers
                c.status, c.alloc_until = "allocating", self._clock()
                return "allocating"
            self._confirm(pool, c, match_id, None)
            return "matched"

    def _confirm(self, pool: str, c: _Check, match_id: str, assignment: dict[str, Any] | None) -> None:
        now = self._clock()
        for tid in c.tickets:
            t = self._t[tid]
            t.status, t.lease_until = "matched", None
            t.result = {**(t.result or {}), "matched_at": now}
            if assignment is not None:
                t.result["assignment"] = dict(assignment)
            self._free_players(t)
            self._event("matched", t, match_id=match_id)
        if c.record is not None:
            self._keep_match(pool, c.record)
        c.status, c.ended_at = "matched", now

    def take_allocations(self, pool: str, lease_s: float, limit: int = 16) -> list[dict[str, Any]]:
        now, out = self._clock(), []
        with self._lock:
            for (p, mid), c in self._checks.items():
                if len(out) >= limit:
                    break
                if p != pool or c.status != "allocating" or c.alloc_until > now:
                    continue
                c.alloc_until = now + lease_s
                first = (self._t[c.tickets[0]].result or {}) if c.tickets[0] in self._t else {}
                out.append({"match_id": mid, "pool": pool, "teams": first.get("teams"), "region": first.get("region")})
        return out

    def finish_allocation(self, pool: str, match_id: str, assignment: dict[str, Any] | None, reason: str = "") -> str:
        with self._lock:
            c = self._checks.get((pool, match_id))
            if c is None:
                return "unknown"
            if c.status != "allocating":
                return c.status
            if not all(self._in_check(self._t.get(tid), match_id) for tid in c.tickets):  # one was cancelled
                self._end_check(c, match_id)
                return c.status
            if assignment is not None:
                self._confirm(pool, c, match_id, assignment)
                return "matched"
            for tid in c.tickets:  # no game server: every player back to their place, with the reason
                t = self._t[tid]
                t.result, t.unmatched_reason = None, reason or None
                self._requeue(c.pool, t)
                self._event("queued", t, requeued_from=match_id)
            c.status, c.ended_at = "unallocated", self._clock()
            return "unallocated"

    def _end_check(self, c: _Check, match_id: str, decliner: str | None = None, timed_out: bool = False) -> None:
        """Decline or timeout: the decliner's ticket (or, on timeout, every ticket with a player who did not
        accept) ends; the others go back to their place in the queue."""
        for tid in c.tickets:
            t = self._t.get(tid)
            if not self._in_check(t, match_id):
                continue
            waiting = {p["id"] for p in t.players} - c.accepted
            if tid == decliner:
                t.status, t.lease_until, t.reason = "declined", None, "declined the match"
                self._free_players(t)
                self._event("declined", t, match_id=match_id)
            elif timed_out and waiting:
                t.status, t.lease_until, t.reason = "expired", None, TIMEOUT_REASON
                self._free_players(t)
                self._event("expired", t, reason=TIMEOUT_REASON)
            else:
                t.result = None
                self._requeue(c.pool, t)
                self._event("queued", t, requeued_from=match_id)
        c.status = "declined" if decliner is not None else "expired"
        c.ended_at = self._clock()

    def reap_checks(self, pool: str, now: float | None = None) -> int:
        now = self._clock() if now is None else now
        n = 0
        with self._lock:
            for (p, mid), c in list(self._checks.items()):
                if p != pool:
                    continue
                if c.status == "pending" and c.deadline <= now:
                    self._end_check(c, mid, timed_out=True)
                    n += 1
                elif c.status not in ("pending", "allocating") and c.ended_at < now - self.match_retention_s:
                    del self._checks[(p, mid)]
        return n
