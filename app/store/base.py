"""The ticket store's types: tickets, match results and records, backfills, wait inputs, the errors.

The store's interface is a few protocols, one per concern (:mod:`.protocols`); :mod:`.memory` and
:mod:`.redis` implement them.

Lifecycle (Open Match's, with minimatch's atomic claims)::

    queued ──claim (all tickets of a candidate pool or none)──► proposed ──commit──► matched
      ▲  │                                                         │
      │  └── TTL passed ──► expired          lease passed / not selected / crash ──┘ (back to queued)
      └──────────────────── DELETE ──► cancelled (from queued or proposed)

A claim moves every ticket of a candidate pool from ``queued`` to ``proposed`` under one match id
and a lease, or moves none; a commit marks the selected tickets ``matched`` and returns the rest
to the queue, or (if any selected ticket changed meanwhile) returns all of them. So a ticket is in
at most one match, and a crashed worker's tickets come back when its lease runs out.

A ticket also ends ``expired`` with a ``reason`` when the runner that claimed it finds it can no
longer be solved (:meth:`~.protocols.TicketStore.expire_ticket`). Every terminal state (matched, cancelled, expired)
frees the ticket's players, so they may queue again.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

TicketStatus = Literal["queued", "proposed", "matched", "expired", "cancelled", "declined"]
RETENTION_S = 3600.0  # how long a finished ticket stays readable after its TTL
#: default match-record retention (``MGMATCH_MATCH_RETENTION_S``) and most records kept per pool
#: (``MGMATCH_MATCH_MAX_COUNT``): what the match log can be exported from (:class:`MatchRecord`)
MATCH_RETENTION_S = 86_400.0
MATCH_MAX_COUNT = 10_000
_MATCH_POOL = re.compile(r"^([a-z0-9][a-z0-9-]{0,31})\.(.+)$")  # a pool name (config.POOL_NAME) has no dot


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
    unmatched_reason: str | None = None  # why the matchmaker has not matched it yet (set after some unmatched ticks)

    def view(self, now: float | None = None) -> Ticket:
        """The ticket as a reader sees it: a queued ticket past its TTL reads as expired."""
        now = time.time() if now is None else now
        if self.status == "queued" and now >= self.expires_at:
            return Ticket(**{**asdict(self), "status": "expired"})
        return self

    def data_json(self) -> str:
        """The immutable part, as stored (the times are separate fields, stamped by the store)."""
        return json.dumps({"players": self.players, "arm": self.arm, "ab_key": self.ab_key,
                           "attributes": self.attributes, "pool": self.pool, "owner": self.owner})

    @staticmethod
    def from_fields(tid: str, f: dict[str, str]) -> Ticket:
        """A ticket from its stored hash fields (``created``/``expires`` are the store's clock)."""
        d = json.loads(f["data"])
        lease = f.get("lease")
        created = float(f["created"]) if f.get("created") else d["created_at"]
        expires = float(f["expires"]) if f.get("expires") else d["expires_at"]
        return Ticket(id=tid, pool=d["pool"], players=d["players"], created_at=created,
                      expires_at=expires, status=f.get("status", "queued"), arm=d.get("arm"),
                      ab_key=d.get("ab_key"), attributes=d.get("attributes") or {}, match_id=f.get("match_id") or None,
                      lease_until=float(lease) if lease else None,
                      result=json.loads(f["result"]) if f.get("result") else None, owner=d.get("owner"),
                      reason=f.get("reason") or None, unmatched_reason=f.get("unmatched") or None)


def match_pool(match_id: str) -> str | None:
    """The pool a match id names (``<pool>.<rest>``, as the matchmaker makes them), or None."""
    m = _MATCH_POOL.match(match_id)
    return m.group(1) if m else None


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
    assignment: dict[str, Any] | None = None  # the allocator's answer: where the match is played

    def for_ticket(self, tid: str) -> dict[str, Any]:
        out = {"match_id": self.match_id, "teams": self.teams, "team": self.team_of_ticket[tid],
               "region": self.region, "method": self.method, "arm": self.arm,
               "model_version": self.model_version, "objective": self.objective, "solver_status": self.status,
               "matched_at": time.time()}
        if self.assignment is not None:
            out["assignment"] = self.assignment
        return out


BackfillStatus = Literal["open", "filled", "cancelled", "expired"]


@dataclass
class Backfill:
    """Open slots of a running match, filled from the pool's queue (``POST /v1/backfills``).

    ``players`` are the spec players now in the match and ``teams`` their ids per team: they stay
    pinned to their teams. ``open`` is the free slots per team. A fill is all or nothing: the
    backfill stays ``open`` with nothing ``assigned`` until one matchmaker solve fills every open
    slot, then the chosen tickets end ``matched`` (under the backfill's ``match_id``) and the
    backfill ``filled`` in one atomic step; past its TTL it reads ``expired``.
    """

    id: str
    pool: str
    match_id: str
    players: list[dict[str, Any]]
    teams: list[list[str]]
    open: list[int]
    created_at: float
    expires_at: float
    status: BackfillStatus = "open"
    assigned: list[list[str]] = field(default_factory=list)  # new player ids per team (empty lists while open)
    tickets: list[str] = field(default_factory=list)          # the tickets that filled it
    filled_at: float | None = None
    owner: str | None = None

    def view(self, now: float | None = None) -> Backfill:
        """As a reader sees it: an open backfill past its TTL reads as expired."""
        now = time.time() if now is None else now
        if self.status == "open" and now >= self.expires_at:
            return Backfill(**{**asdict(self), "status": "expired"})
        return self

    def data_json(self) -> str:
        """The immutable part, as stored."""
        return json.dumps({"pool": self.pool, "match_id": self.match_id, "players": self.players,
                           "teams": self.teams, "open": self.open, "owner": self.owner})

    @staticmethod
    def from_fields(bid: str, f: dict[str, str]) -> Backfill:
        d = json.loads(f["data"])
        teams = d["teams"]
        return Backfill(id=bid, pool=d["pool"], match_id=d["match_id"], players=d["players"], teams=teams,
                        open=d["open"], created_at=float(f["created"]), expires_at=float(f["expires"]),
                        status=f.get("status", "open"),
                        assigned=json.loads(f["assigned"]) if f.get("assigned") else [[] for _ in teams],
                        tickets=json.loads(f["tickets"]) if f.get("tickets") else [],
                        filled_at=float(f["filled_at"]) if f.get("filled_at") else None, owner=d.get("owner"))


@dataclass
class MatchRecord:
    """What the match log needs of one committed match, kept for ``MGMATCH_MATCH_RETENTION_S`` (at most
    ``MGMATCH_MATCH_MAX_COUNT`` per pool, oldest dropped first) so the game server can post its result.

    ``teams`` holds the spec players (§1) as the solver saw them when the match was formed (features,
    skill, roles, ``waited_s``, ``party`` …); ``owners`` the client identities of its tickets (who may
    post the result when authentication is on); ``time`` is stamped by the store's clock at commit.
    ``result`` is ``{"engagement": x, "players": {id: x}?}`` once posted; ``result_at`` when.
    """

    match_id: str
    pool: str
    teams: list[list[dict[str, Any]]]
    method: str | None = None
    arm: str | None = None
    model_version: str | None = None
    objective: float | None = None
    owners: list[str] = field(default_factory=list)
    time: float = 0.0
    result: dict[str, Any] | None = None
    result_at: float | None = None

    def record_json(self) -> str:
        """The immutable part, as stored (time and result are stored beside it)."""
        return json.dumps({"match_id": self.match_id, "pool": self.pool, "teams": self.teams, "method": self.method,
                           "arm": self.arm, "model_version": self.model_version, "objective": self.objective,
                           "owners": self.owners}, allow_nan=False)  # not asdict: it deep-copies every feature

    @staticmethod
    def from_fields(f: dict[str, str]) -> MatchRecord:
        """A record from its stored fields: ``record`` (JSON), ``time``, and ``result``/``result_at`` when posted."""
        d = json.loads(f["record"])
        return MatchRecord(**d, time=float(f["time"]), result=json.loads(f["result"]) if f.get("result") else None,
                           result_at=float(f["result_at"]) if f.get("result_at") else None)

    def player_ids(self) -> set[str]:
        return {p["id"] for team in self.teams for p in team}

    def log_line(self) -> dict[str, Any]:
        """The match as one ``mgmatch-matchlog/v1`` line (spec §5); needs a result. A player's own
        engagement, when the game server sent one, is the optional player field ``engagement``."""
        if self.result is None:
            raise ValueError(f"match {self.match_id} has no result")
        per_player = self.result.get("players") or {}
        teams = [[{**p, "engagement": per_player[p["id"]]} if p["id"] in per_player else dict(p) for p in team]
                 for team in self.teams]
        line = {"format": "mgmatch-matchlog/v1", "match_id": self.match_id, "time": self.time, "teams": teams,
                "engagement": self.result["engagement"]}
        # optional §5 fields: the A/B arm that formed the match and the model version it was formed with
        line.update({k: v for k, v in (("arm", self.arm), ("model_version", self.model_version)) if v is not None})
        return line


@dataclass(frozen=True)
class Rating:
    """A player's rating (openskill): mean ``mu``, uncertainty ``sigma``, games rated, and ``version``, which
    every update increments (what a rating update compares before it writes)."""

    mu: float
    sigma: float
    games: int = 0
    version: int = 0


class Conflict(Exception):
    """The requested change does not apply to the ticket's current status."""


class PlayerBusy(Conflict):
    """A new ticket names a player who already holds a live (queued or proposed) ticket, in any pool:
    HTTP 409 / gRPC ALREADY_EXISTS naming ``players[i].id`` and the ticket that holds the player."""

    def __init__(self, index: int, player_id: str, holder: str | None):
        self.field = f"players[{index}].id"
        self.player_id, self.holder = player_id, holder
        super().__init__(f"player {player_id!r} already holds live ticket {holder}" if holder is not None else
                         f"player {player_id!r} is being queued by other requests right now; retry")


class StoreUnavailable(Exception):
    """The store's backend cannot be reached right now (the API answers 503 with Retry-After).

    Raised for connection failures, timeouts, a server still loading its data, a replica that is
    read-only or without its master during a failover: conditions that pass; retrying later is right.
    """


#: the throughput record covers this many seconds of committed matches
THROUGHPUT_WINDOW_S = 120.0


def rate_of(buckets: list[tuple[int, int]], now: float, window_s: float = THROUGHPUT_WINDOW_S) -> float | None:
    """Players matched per second from (whole second, players matched in it) buckets: the players of
    every bucket after the oldest one in the window, over the time since the middle of that oldest
    second. None (unknown) with fewer than two seconds with matches in the window, so one early match
    does not read as an infinite rate."""
    recent = sorted((s, n) for s, n in buckets if now - window_s <= s + 1 and s <= now)
    if len(recent) < 2:
        return None
    span = now - min(recent[0][0] + 0.5, now)
    if span <= 0:
        return None
    return sum(n for _, n in recent[1:]) / span


@dataclass(frozen=True)
class WaitInputs:
    """One read of what a wait estimate needs (see :func:`mgmatch.app.waits.estimate_wait`)."""

    rank: int | None          # tickets ahead of this one in the queue (None: it is not queued)
    queued_tickets: int       # tickets in the queue
    live_players: int         # players with a live (queued or proposed) ticket in the pool
    live_tickets: int         # queued + proposed tickets (players per ticket = live_players / live_tickets)
    rate: float | None        # players matched per second recently (None: unknown)
    now: float | None = None  # the store's clock when it was read (Redis TIME), for the ticket's remaining TTL


def wait_reachable(ping: Callable[[], bool], wait_s: float, what: str, stop: threading.Event | None = None,
                   max_delay_s: float = 2.0) -> bool | None:
    """Ping until the store answers, backing off from 0.1 s to ``max_delay_s`` and logging every ~10 s
    (what ``serve`` and every worker do at start-up).

    Returns:
        True once it answers, False when ``wait_s`` passed without an answer, None when ``stop`` was set.
    """
    log = logging.getLogger("mgmatch.store")
    start = time.monotonic()
    delay, logged = 0.1, -1.0
    while stop is None or not stop.is_set():
        if ping():
            if logged >= 0:
                log.info("%s answered after %.1f s", what, time.monotonic() - start)
            return True
        waited = time.monotonic() - start
        if waited >= wait_s:
            return False
        if logged < 0 or waited - logged >= 10:
            log.warning("%s does not answer; waiting (%.0f of %g s)", what, waited, wait_s)
            logged = waited
        pause = min(delay, max(0.0, wait_s - waited))
        if stop is None:
            time.sleep(pause)
        else:
            stop.wait(pause)
        delay = min(delay * 2, max_delay_s)
    return None
