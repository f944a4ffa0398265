"""The in-memory store: everything in one process, behind one lock (the embedded default).

Times come from this process's clock (``time.time()``, or the ``clock`` given, e.g. the simulated
clock of :mod:`mgmatch.lab.replay`); there is no other clock to agree with.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from itertools import islice
from typing import Any

from sortedcontainers import SortedList

from .base import (
    MATCH_MAX_COUNT,
    MATCH_RETENTION_S,
    RETENTION_S,
    THROUGHPUT_WINDOW_S,
    Backfill,
    Conflict,
    MatchRecord,
    MatchResult,
    Store,
    Ticket,
    WaitInputs,
    rate_of,
)


class MemoryStore(Store):
    """Everything in one process, behind one lock. The embedded default."""

    def __init__(self, max_events: int = 10_000, match_retention_s: float = MATCH_RETENTION_S,
                 match_max_count: int = MATCH_MAX_COUNT, clock: Callable[[], float] = time.time):
        self._clock = clock
        self._matched: dict[str, dict[int, int]] = {}  # pool → whole second → players matched in it
        self.match_retention_s, self.match_max_count = float(match_retention_s), int(match_max_count)
        self._matches: dict[tuple[str, str], MatchRecord] = {}  # (pool, match id) → record
        self._match_index: dict[str, SortedList] = {}  # pool → (time, match id), oldest first
        self._t: dict[str, Ticket] = {}
        self._idem: dict[tuple[str, str], tuple[str, float]] = {}
        # per pool, the queued tickets as (created_at, id), FIFO, and as (expires_at, id) for the reaper:
        # a requeued ticket returns to its place, and nothing here costs more than O(log n) per ticket
        self._queues: dict[str, SortedList] = {}
        self._expiry: dict[str, SortedList] = {}
        self._forget_at = 0.0
        self._pending: dict[str, set[str]] = {}
        self._players: dict[tuple[str, str], str] = {}  # (pool, player id) → live ticket id
        self._backfills: dict[str, Backfill] = {}
        self._open_bf: dict[str, set[str]] = {}  # pool → ids of its open backfills (what a tick reads)
        self._lock = threading.Lock()
        self.events: deque[dict[str, Any]] = deque(maxlen=max_events)

    def _event(self, kind: str, t: Ticket, **extra) -> None:
        self.events.append({"event": kind, "ticket": t.id, "pool": t.pool, "ts": self._clock(), **extra})

    def _free_players(self, t: Ticket) -> None:
        """Forget the ticket's players, each only while it still names this ticket."""
        for p in t.players:
            key = (t.pool, p["id"])
            if self._players.get(key) == t.id:
                del self._players[key]

    def player_count(self, pool: str) -> int:
        """Players with a live ticket in the pool (what the one-ticket-per-player check holds)."""
        with self._lock:
            return sum(1 for k in self._players if k[0] == pool)

    def create(self, ticket: Ticket, idempotency_key: str | None = None) -> tuple[Ticket, bool]:
        with self._lock:
            if idempotency_key is not None:
                hit = self._idem.get((ticket.pool, idempotency_key))
                if hit is not None and hit[1] > self._clock() and hit[0] in self._t:
                    return self._t[hit[0]].view(self._clock()), False
            for p in ticket.players:
                other = self._players.get((ticket.pool, p["id"]))
                if other is not None and other in self._t and self._t[other].view(self._clock()).status in ("queued", "proposed"):
                    raise Conflict(f"player {p['id']!r} is already queued in ticket {other}")
            for p in ticket.players:
                self._players[(ticket.pool, p["id"])] = ticket.id
            if idempotency_key is not None:
                self._idem[(ticket.pool, idempotency_key)] = (ticket.id, ticket.expires_at)
            self._t[ticket.id] = ticket
            self._enqueue(ticket)
            self._event("created", ticket)
            return ticket, True

    def _readable(self, ticket_id: str) -> Ticket | None:
        t = self._t.get(ticket_id)
        now = self._clock()
        if t is None or now > t.expires_at + RETENTION_S:
            return None
        return t.view(now)

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

    def _all_queued(self, pool: str, ticket_ids: list[str], now: float) -> bool:
        """Every ticket exists, is queued in ``pool`` and has not expired (call under the lock)."""
        for tid in ticket_ids:
            t = self._t.get(tid)
            if t is None or t.pool != pool or t.status != "queued" or t.expires_at <= now:
                return False
        return True

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

    def _enqueue(self, t: Ticket) -> None:
        self._queues.setdefault(t.pool, SortedList()).add((t.created_at, t.id))
        self._expiry.setdefault(t.pool, SortedList()).add((t.expires_at, t.id))

    def _dequeue(self, t: Ticket) -> None:
        self._queues[t.pool].discard((t.created_at, t.id))
        self._expiry[t.pool].discard((t.expires_at, t.id))

    def _requeue(self, pool: str, t: Ticket) -> None:
        """proposed → queued, back in its place by creation time."""
        t.status, t.match_id, t.lease_until = "queued", None, None
        self._pending.get(pool, set()).discard(t.id)
        self._enqueue(t)

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
        return expired, released

    # ------------------------------------------------------------------ backfills

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
    # ------------------------------------------------------------------ match records

    def _keep_match(self, pool: str, record: MatchRecord) -> None:
        """Store a committed match's record (a copy, stamped now) and trim the pool's records by age and count."""
        now = self._clock()
        rec = MatchRecord(**{**record.__dict__, "pool": pool, "time": now, "result": None, "result_at": None})
        index = self._match_index.setdefault(pool, SortedList())
        old = self._matches.pop((pool, rec.match_id), None)
        if old is not None:
            index.discard((old.time, old.match_id))
        self._matches[(pool, rec.match_id)] = rec
        index.add((now, rec.match_id))
        while index and (len(index) > self.match_max_count or index[0][0] < now - self.match_retention_s):
            _, mid = index.pop(0)
            self._matches.pop((pool, mid), None)

    def _live_match(self, pool: str, match_id: str) -> MatchRecord | None:
        rec = self._matches.get((pool, match_id))
        if rec is None or rec.time < self._clock() - self.match_retention_s:
            return None
        return rec

    def get_match(self, pool: str, match_id: str) -> MatchRecord | None:
        with self._lock:
            rec = self._live_match(pool, match_id)
            return None if rec is None else MatchRecord(**rec.__dict__)

    def put_match_result(self, pool: str, match_id: str, result: dict[str, Any]) -> tuple[MatchRecord | None, bool]:
        with self._lock:
            rec = self._live_match(pool, match_id)
            if rec is None:
                return None, False
            fresh = rec.result is None
            if fresh:
                rec.result, rec.result_at = json.loads(json.dumps(result, allow_nan=False)), self._clock()
            return MatchRecord(**rec.__dict__), fresh

    def match_index(self, pool: str, min_time: float, limit: int) -> list[tuple[str, float]]:
        with self._lock:
            index = self._match_index.get(pool)
            if not index or limit <= 0:
                return []
            low = max(min_time, self._clock() - self.match_retention_s)
            return [(mid, t) for t, mid in islice(index.irange((low, "")), limit)]

    def get_matches(self, pool: str, match_ids: list[str]) -> list[MatchRecord | None]:
        with self._lock:
            return [None if (r := self._live_match(pool, mid)) is None else MatchRecord(**r.__dict__)
                    for mid in match_ids]

    # ------------------------------------------------------------------ wait estimates and unmatched reasons

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
