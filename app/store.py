"""The ticket store: one interface, an in-memory implementation (embedded default) and a factory.

Lifecycle (Open Match's, with minimatch's atomic claims)::

    queued ──claim (all tickets of a candidate pool or none)──► proposed ──commit──► matched
      ▲  │                                                         │
      │  └── TTL passed ──► expired          lease passed / not selected / crash ──┘ (back to queued)
      └──────────────────── DELETE ──► cancelled (from queued or proposed)

A claim moves every ticket of a candidate pool from ``queued`` to ``proposed`` under one match id
and a lease, or moves none; a commit marks the selected tickets ``matched`` and returns the rest
to the queue, or (if any selected ticket changed meanwhile) returns all of them. So a ticket is in
at most one match, and a crashed worker's tickets come back when its lease runs out.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

TicketStatus = Literal["queued", "proposed", "matched", "expired", "cancelled"]
RETENTION_S = 3600.0  # how long a finished ticket stays readable after its TTL


def new_ticket_id(pool: str) -> str:
    """Ticket ids carry their pool (``<pool>.<hex>``) so a lookup touches one shard."""
    return f"{pool}.{uuid.uuid4().hex}"


def pool_of(ticket_id: str) -> str | None:
    pool, sep, rest = ticket_id.rpartition(".")
    return pool if sep and pool and len(rest) == 32 else None


@dataclass
class Ticket:
    id: str
    pool: str
    players: list[dict[str, Any]]
    created_at: float
    expires_at: float
    status: TicketStatus = "queued"
    arm: str | None = None
    ab_key: str | None = None
    attributes: dict[str, Any] = field(default_factory=dict)
    match_id: str | None = None
    lease_until: float | None = None
    result: dict[str, Any] | None = None  # set when matched: teams, team, region, method, arm, model_version
    owner: str | None = None  # client identity (API key digest) that created it; other clients see 404
    reason: str | None = None  # why a ticket ended expired without its TTL running out (e.g. it no longer fits its pool)

    def view(self, now: float | None = None) -> Ticket:
        """The ticket as a reader sees it: a queued ticket past its TTL reads as expired."""
        now = time.time() if now is None else now
        if self.status == "queued" and now >= self.expires_at:
            return Ticket(**{**asdict(self), "status": "expired"})
        return self

    def data_json(self) -> str:
        """The immutable part, as stored."""
        return json.dumps({"players": self.players, "created_at": self.created_at, "expires_at": self.expires_at,
                           "arm": self.arm, "ab_key": self.ab_key, "attributes": self.attributes, "pool": self.pool,
                           "owner": self.owner})

    @staticmethod
    def from_fields(tid: str, f: dict[str, str]) -> Ticket:
        d = json.loads(f["data"])
        lease = f.get("lease")
        return Ticket(id=tid, pool=d["pool"], players=d["players"], created_at=d["created_at"],
                      expires_at=d["expires_at"], status=f.get("status", "queued"), arm=d.get("arm"),
                      ab_key=d.get("ab_key"), attributes=d.get("attributes") or {}, match_id=f.get("match_id") or None,
                      lease_until=float(lease) if lease else None,
                      result=json.loads(f["result"]) if f.get("result") else None, owner=d.get("owner"),
                      reason=f.get("reason") or None)


@dataclass
class MatchResult:
    """What a commit records on every selected ticket."""

    match_id: str
    teams: list[list[str]]            # player ids per team
    team_of_ticket: dict[str, int]    # ticket id → team index
    region: str | None = None
    method: str | None = None
    arm: str | None = None
    model_version: str | None = None
    objective: float | None = None
    status: str | None = None

    def for_ticket(self, tid: str) -> dict[str, Any]:
        return {"match_id": self.match_id, "teams": self.teams, "team": self.team_of_ticket[tid],
                "region": self.region, "method": self.method, "arm": self.arm,
                "model_version": self.model_version, "objective": self.objective, "solver_status": self.status,
                "matched_at": time.time()}


class Conflict(Exception):
    """The requested change does not apply to the ticket's current status."""


class StoreUnavailable(Exception):
    """The store's backend cannot be reached right now (the API answers 503 with Retry-After)."""


class Store(ABC):
    """What the API and the workers need from ticket storage."""

    @abstractmethod
    def create(self, ticket: Ticket, idempotency_key: str | None = None) -> tuple[Ticket, bool]:
        """Store a new ticket; with a known idempotency key, return the earlier ticket and False."""

    def create_many(self, items: list[tuple[Ticket, str | None]]) -> list[tuple[Ticket, bool] | Conflict]:
        """Create several tickets; a ticket refused by a conflict yields its Conflict in its place."""
        out: list[tuple[Ticket, bool] | Conflict] = []
        for t, key in items:
            try:
                out.append(self.create(t, key))
            except Conflict as err:
                out.append(err)
        return out

    @abstractmethod
    def get(self, ticket_id: str) -> Ticket | None: ...

    @abstractmethod
    def cancel(self, ticket_id: str) -> Ticket | None:
        """queued/proposed → cancelled; raises Conflict for a matched/expired ticket; None if unknown."""

    @abstractmethod
    def queued(self, pool: str, limit: int = 10_000) -> list[Ticket]:
        """Queued, unexpired tickets of a pool, longest waiting first."""

    @abstractmethod
    def queue_depth(self, pool: str) -> int: ...

    @abstractmethod
    def claim(self, pool: str, ticket_ids: list[str], match_id: str, lease_until: float) -> bool:
        """queued → proposed for every ticket, or for none (returns False)."""

    @abstractmethod
    def commit(self, pool: str, match_id: str, selected: list[str], unselected: list[str],
               result: MatchResult) -> bool:
        """Selected → matched, unselected → queued, all or nothing; False (and all proposed returned) on conflict."""

    @abstractmethod
    def release(self, pool: str, match_id: str, ticket_ids: list[str]) -> int:
        """proposed (by this match) → queued; returns how many moved."""

    @abstractmethod
    def reap(self, pool: str, now: float | None = None) -> tuple[int, int]:
        """Expire queued tickets past their TTL, release proposals past their lease: (expired, released)."""

    @abstractmethod
    def takeover(self, pool: str, claim_id: str, new_id: str, ticket_ids: list[str], lease_until: float) -> int:
        """Fence a claim for a runner taking it over: every ticket still proposed by ``claim_id`` (or by
        an earlier takeover of it, ``<claim_id>.<token>``) is re-stamped ``new_id`` with a fresh lease.
        A runner still holding an older id then fails to commit or release them. Returns tickets taken."""

    # The API's hot path is async: a store that talks to a server over the network overrides these
    # with native asyncio calls (no thread hop per request); an in-process store answers directly.

    async def acreate(self, ticket: Ticket, idempotency_key: str | None = None) -> tuple[Ticket, bool]:
        return self.create(ticket, idempotency_key)

    async def acreate_many(self, items: list[tuple[Ticket, str | None]]) -> list[tuple[Ticket, bool] | Conflict]:
        return self.create_many(items)

    async def aget(self, ticket_id: str) -> Ticket | None:
        return self.get(ticket_id)

    async def acancel(self, ticket_id: str) -> Ticket | None:
        return self.cancel(ticket_id)

    def ping(self) -> bool:
        return True

    def close(self) -> None:
        return None


class MemoryStore(Store):
    """Everything in one process, behind one lock. The embedded default."""

    def __init__(self, max_events: int = 10_000):
        self._t: dict[str, Ticket] = {}
        self._idem: dict[tuple[str, str], tuple[str, float]] = {}
        self._queues: dict[str, dict[str, None]] = {}   # insertion-ordered set = FIFO by created_at
        self._pending: dict[str, set[str]] = {}
        self._players: dict[tuple[str, str], str] = {}  # (pool, player id) → live ticket id
        self._lock = threading.Lock()
        self.events: deque[dict[str, Any]] = deque(maxlen=max_events)

    def _event(self, kind: str, t: Ticket, **extra) -> None:
        self.events.append({"event": kind, "ticket": t.id, "pool": t.pool, "ts": time.time(), **extra})

    def create(self, ticket: Ticket, idempotency_key: str | None = None) -> tuple[Ticket, bool]:
        with self._lock:
            if idempotency_key is not None:
                hit = self._idem.get((ticket.pool, idempotency_key))
                if hit is not None and hit[1] > time.time() and hit[0] in self._t:
                    return self._t[hit[0]].view(), False
            for p in ticket.players:
                other = self._players.get((ticket.pool, p["id"]))
                if other is not None and other in self._t and self._t[other].view().status in ("queued", "proposed"):
                    raise Conflict(f"player {p['id']!r} is already queued in ticket {other}")
            for p in ticket.players:
                self._players[(ticket.pool, p["id"])] = ticket.id
            if idempotency_key is not None:
                self._idem[(ticket.pool, idempotency_key)] = (ticket.id, ticket.expires_at)
            self._t[ticket.id] = ticket
            self._queues.setdefault(ticket.pool, {})[ticket.id] = None
            self._event("created", ticket)
            return ticket, True

    def get(self, ticket_id: str) -> Ticket | None:
        with self._lock:
            t = self._t.get(ticket_id)
            if t is None or time.time() > t.expires_at + RETENTION_S:
                return None
            return t.view()

    def cancel(self, ticket_id: str) -> Ticket | None:
        with self._lock:
            t = self._t.get(ticket_id)
            if t is None:
                return None
            v = t.view()
            if v.status not in ("queued", "proposed"):
                raise Conflict(f"ticket is {v.status}")
            self._queues.get(t.pool, {}).pop(t.id, None)
            self._pending.get(t.pool, set()).discard(t.id)
            t.status = "cancelled"
            self._event("cancelled", t)
            return t

    def queued(self, pool: str, limit: int = 10_000) -> list[Ticket]:
        now = time.time()
        with self._lock:
            out = []
            for tid in self._queues.get(pool, {}):
                t = self._t[tid]
                if t.expires_at > now:
                    out.append(t)
                    if len(out) >= limit:
                        break
            return out

    def queue_depth(self, pool: str) -> int:
        with self._lock:
            return len(self._queues.get(pool, {}))

    def claim(self, pool: str, ticket_ids: list[str], match_id: str, lease_until: float) -> bool:
        now = time.time()
        with self._lock:
            q = self._queues.get(pool, {})
            for tid in ticket_ids:
                t = self._t.get(tid)
                if t is None or t.status != "queued" or tid not in q or t.expires_at <= now:
                    return False
            for tid in ticket_ids:
                t = self._t[tid]
                t.status, t.match_id, t.lease_until = "proposed", match_id, lease_until
                del q[tid]
                self._pending.setdefault(pool, set()).add(tid)
            return True

    def _requeue(self, pool: str, t: Ticket) -> None:
        t.status, t.match_id, t.lease_until = "queued", None, None
        self._pending.get(pool, set()).discard(t.id)
        self._queues.setdefault(pool, {})[t.id] = None

    def _resort(self, pool: str) -> None:
        """Keep FIFO by creation time: requeued tickets return to their place."""
        q = self._queues.get(pool, {})
        if len(q) > 1:
            items = sorted(q, key=lambda k: self._t[k].created_at)
            q.clear()
            q.update(dict.fromkeys(items))

    def commit(self, pool: str, match_id: str, selected: list[str], unselected: list[str],
               result: MatchResult) -> bool:
        with self._lock:
            mine = [tid for tid in selected + unselected
                    if (t := self._t.get(tid)) is not None and t.status == "proposed" and t.match_id == match_id]
            ok = all((t := self._t.get(tid)) is not None and t.status == "proposed" and t.match_id == match_id
                     for tid in selected)
            if not ok:
                for tid in mine:
                    self._requeue(pool, self._t[tid])
                self._resort(pool)
                return False
            for tid in selected:
                t = self._t[tid]
                t.status, t.lease_until, t.result = "matched", None, result.for_ticket(tid)
                self._pending.get(pool, set()).discard(tid)
                self._event("matched", t, match_id=match_id)
            for tid in unselected:
                t = self._t.get(tid)
                if t is not None and t.status == "proposed" and t.match_id == match_id:
                    self._requeue(pool, t)
            self._resort(pool)
            return True

    def release(self, pool: str, match_id: str, ticket_ids: list[str]) -> int:
        n = 0
        with self._lock:
            for tid in ticket_ids:
                t = self._t.get(tid)
                if t is not None and t.status == "proposed" and t.match_id == match_id:
                    self._requeue(pool, t)
                    n += 1
            self._resort(pool)
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

    def reap(self, pool: str, now: float | None = None) -> tuple[int, int]:
        now = time.time() if now is None else now
        expired = released = 0
        with self._lock:
            q = self._queues.get(pool, {})
            for tid in [k for k in q if self._t[k].expires_at <= now]:
                del q[tid]
                self._t[tid].status = "expired"
                self._event("expired", self._t[tid])
                expired += 1
            for tid in list(self._pending.get(pool, set())):
                t = self._t[tid]
                if t.lease_until is not None and t.lease_until <= now:
                    self._requeue(pool, t)
                    released += 1
            if released:
                self._resort(pool)
            # forget finished tickets after their retention
            if len(self._t) > 10_000:
                for tid in [k for k, t in self._t.items() if t.expires_at + RETENTION_S < now]:
                    del self._t[tid]
                self._idem = {k: v for k, v in self._idem.items() if v[1] > now}
                self._players = {k: v for k, v in self._players.items() if v in self._t}
        return expired, released


def make_store(settings) -> Store:
    """The one factory: ``settings.store`` picks the implementation."""
    if settings.store == "redis":
        from .redis_store import RedisStore

        return RedisStore.from_url(settings.redis_url, prefix=settings.key_prefix)
    return MemoryStore()
