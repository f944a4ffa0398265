"""The in-memory store's shared state: everything in one process, behind one lock.

Times come from this process's clock (``time.time()``, or the ``clock`` given, e.g. the simulated
clock of :mod:`mgmatch.lab.replay`); there is no other clock to agree with.

:class:`MemoryCore` holds the state of every concern and the steps that more than one concern takes
under the lock (a commit keeps the match's record; a backfill fill matches queued tickets; a wait
estimate reads the queue). Each concern's public methods live in their own module and subclass it.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from sortedcontainers import SortedList

from ..base import MATCH_MAX_COUNT, MATCH_RETENTION_S, RETENTION_S, Backfill, MatchRecord, Rating, Ticket


class MemoryCore:
    """The state of every concern, one lock over all of it, and the steps concerns share (call those
    under the lock)."""

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
        self._live: dict[str, str] = {}  # player id → its live ticket, in any pool (one live ticket per player)
        self._ratings: dict[str, Rating] = {}  # player id → rating
        self._rated: dict[str, float] = {}  # match id → until when its rating update is remembered
        self._checks: dict[tuple[str, str], Any] = {}  # (pool, match id) → its ready check (memory/checks.py)
        self._backfills: dict[str, Backfill] = {}
        self._open_bf: dict[str, set[str]] = {}  # pool → ids of its open backfills (what a tick reads)
        self._lock = threading.Lock()
        self.events: deque[dict[str, Any]] = deque(maxlen=max_events)

    def ping(self) -> bool:
        return True

    def close(self) -> None:
        return None

    # ------------------------------------------------------------------ tickets (shared with backfills, stats)

    def _event(self, kind: str, t: Ticket, **extra) -> None:
        self.events.append({"event": kind, "ticket": t.id, "pool": t.pool, "ts": self._clock(), **extra})

    def _free_players(self, t: Ticket) -> None:
        """Forget the ticket's players, each only while it still names this ticket."""
        for p in t.players:
            key = (t.pool, p["id"])
            if self._players.get(key) == t.id:
                del self._players[key]
            if self._live.get(p["id"]) == t.id:
                del self._live[p["id"]]

    def _is_live(self, ticket_id: str) -> bool:
        """The ticket exists and is queued (unexpired) or proposed."""
        t = self._t.get(ticket_id)
        return t is not None and t.view(self._clock()).status in ("queued", "proposed")

    def _readable(self, ticket_id: str) -> Ticket | None:
        t = self._t.get(ticket_id)
        now = self._clock()
        if t is None or now > t.expires_at + RETENTION_S:
            return None
        return t.view(now)

    def _all_queued(self, pool: str, ticket_ids: list[str], now: float) -> bool:
        """Every ticket exists, is queued in ``pool`` and has not expired (call under the lock)."""
        for tid in ticket_ids:
            t = self._t.get(tid)
            if t is None or t.pool != pool or t.status != "queued" or t.expires_at <= now:
                return False
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

    # ------------------------------------------------------------------ match records (kept by a commit)

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
