"""Tickets in memory (:class:`~mgmatch.app.store.protocols.TicketStore`)."""

from __future__ import annotations

from itertools import islice

from ..base import RETENTION_S, Conflict, MatchRecord, MatchResult, PlayerBusy, Ticket
from ..protocols import TicketStore
from .core import MemoryCore


class MemoryTickets(MemoryCore, TicketStore):
    """Tickets, the pools' queues, claims, commits and the reaper, under the store's lock."""

    def player_count(self, pool: str) -> int:
        with self._lock:
            return sum(1 for k in self._players if k[0] == pool)

    def create(self, ticket: Ticket, idempotency_key: str | None = None) -> tuple[Ticket, bool]:
        with self._lock:
            if idempotency_key is not None:
                hit = self._idem.get((ticket.pool, idempotency_key))
                if hit is not None and hit[1] > self._clock() and hit[0] in self._t:
                    return self._t[hit[0]].view(self._clock()), False
            for i, p in enumerate(ticket.players):
                other = self._live.get(p["id"])
                if other is not None and other != ticket.id and self._is_live(other):
                    raise PlayerBusy(i, p["id"], other)
            for p in ticket.players:
                self._players[(ticket.pool, p["id"])] = ticket.id
                self._live[p["id"]] = ticket.id
            if idempotency_key is not None:
                self._idem[(ticket.pool, idempotency_key)] = (ticket.id, ticket.expires_at)
            self._t[ticket.id] = ticket
            self._enqueue(ticket)
            self._event("created", ticket)
            return ticket, True

    def get(self, ticket_id: str) -> Ticket | None:
        with self._lock:
            return self._readable(ticket_id)

    def get_many(self, pool: str, ticket_ids: list[str]) -> list[Ticket | None]:
        with self._lock:
            return [t if (t := self._readable(tid)) is not None and t.pool == pool else None for tid in ticket_ids]

    def cancel(self, ticket_id: str) -> Ticket | None:
        with self._lock:
            t = self._t.get(ticket_id)
            if t is None:
                return None
            v = t.view(self._clock())
            if v.status not in ("queued", "proposed"):
                raise Conflict(f"ticket is {v.status}")
            if t.status == "queued":
                self._dequeue(t)
            self._pending.get(t.pool, set()).discard(t.id)
            t.status, t.lease_until = "cancelled", None
            self._free_players(t)
            self._event("cancelled", t)
            return t

    def queued(self, pool: str, limit: int = 10_000) -> list[Ticket]:
        now = self._clock()
        with self._lock:
            out = []
            for _, tid in self._queues.get(pool, ()):
                t = self._t[tid]
                if t.expires_at > now:
                    out.append(t)
                    if len(out) >= limit:
                        break
            return out

    def queued_ids(self, pool: str, limit: int = 10_000) -> list[str]:
        with self._lock:
            return [tid for _, tid in islice(self._queues.get(pool, ()), limit)]

    def queue_depth(self, pool: str) -> int:
        with self._lock:
            return len(self._queues.get(pool, ()))

    def claim(self, pool: str, ticket_ids: list[str], match_id: str, lease_until: float) -> bool:
        now = self._clock()
        with self._lock:
            if not self._all_queued(pool, ticket_ids, now):
                return False
            for tid in ticket_ids:
                t = self._t[tid]
                self._dequeue(t)
                t.status, t.match_id, t.lease_until = "proposed", match_id, lease_until
                self._pending.setdefault(pool, set()).add(tid)
            return True

    def commit(self, pool: str, match_id: str, selected: list[str], unselected: list[str],
               result: MatchResult, record: MatchRecord | None = None) -> bool:
        with self._lock:
            mine = [tid for tid in selected + unselected
                    if (t := self._t.get(tid)) is not None and t.status == "proposed" and t.match_id == match_id]
            ok = all((t := self._t.get(tid)) is not None and t.status == "proposed" and t.match_id == match_id
                     for tid in selected)
            if not ok:
                for tid in mine:
                    self._requeue(pool, self._t[tid])
                return False
            for tid in selected:
                t = self._t[tid]
                t.status, t.lease_until, t.result = "matched", None, result.for_ticket(tid)
                self._pending.get(pool, set()).discard(tid)
                self._free_players(t)
                self._event("matched", t, match_id=match_id)
            for tid in unselected:
                t = self._t.get(tid)
                if t is not None and t.status == "proposed" and t.match_id == match_id:
                    self._requeue(pool, t)
            if record is not None:
                self._keep_match(pool, record)
            return True

    def release(self, pool: str, match_id: str, ticket_ids: list[str]) -> int:
        n = 0
        with self._lock:
            for tid in ticket_ids:
                t = self._t.get(tid)
                if t is not None and t.status == "proposed" and t.match_id == match_id:
                    self._requeue(pool, t)
                    n += 1
        return n

    def takeover(self, pool: str, claim_id: str, new_id: str, ticket_ids: list[str], lease_until: float) -> int:
        n = 0
        with self._lock:
            for tid in ticket_ids:
                t = self._t.get(tid)
                if (t is not None and t.status == "proposed" and t.match_id is not None
                        and (t.match_id == claim_id or t.match_id.startswith(claim_id + "."))):
                    t.match_id, t.lease_until = new_id, lease_until
                    n += 1
        return n

    def expire_ticket(self, pool: str, ticket_id: str, claim_id: str, reason: str) -> bool:
        with self._lock:
            t = self._t.get(ticket_id)
            if t is None or t.pool != pool or t.status != "proposed" or t.match_id != claim_id:
                return False
            self._pending.get(pool, set()).discard(t.id)
            t.status, t.lease_until, t.reason = "expired", None, reason
            self._free_players(t)
            self._event("expired", t, reason=reason)
            return True

    def reap(self, pool: str, now: float | None = None) -> tuple[int, int]:
        now = self._clock() if now is None else now
        expired = released = 0
        with self._lock:
            due = self._expiry.get(pool, ())
            for _, tid in list(islice(due, due.bisect_left((now, "\uffff")) if due else 0)):
                t = self._t[tid]
                self._dequeue(t)
                t.status = "expired"
                self._free_players(t)
                self._event("expired", t)
                expired += 1
            for tid in list(self._pending.get(pool, set())):
                t = self._t[tid]
                if t.lease_until is not None and t.lease_until <= now:
                    self._requeue(pool, t)
                    released += 1
            # forget finished tickets after their retention (a full pass, so at most every 10 s)
            if len(self._t) > 10_000 and now >= self._forget_at:
                self._forget_at = now + 10.0
                for tid in [k for k, t in self._t.items() if t.expires_at + RETENTION_S < now]:
                    del self._t[tid]
                self._idem = {k: v for k, v in self._idem.items() if v[1] > now}
                self._players = {k: v for k, v in self._players.items() if v in self._t}
                self._live = {k: v for k, v in self._live.items() if v in self._t}
        return expired, released
