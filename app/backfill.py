"""Filling backfills (open slots of running matches) from a pool's queue, in the matchmaker's tick.

Every tick, before it forms new matches, the pool's matchmaker takes its open backfills (soonest to
expire first, at most :data:`MAX_PER_TICK`) and for each builds an ordinary instance: the players
already in the match plus queued candidates (whole tickets, parties kept whole, longest waiting
first, at most the pool's ``max_candidates`` players in all), each team's size the players it has
plus its open slots, the pool's rules, ``party_together`` when a candidate is a party, and one pin
per existing player (a ``linear`` rule ``[[pid, team, 1]] == 1``). The pool's configured method
solves it under the pool's budget and engagement model, like a match (:mod:`mgmatch.app.engine`).
The chosen tickets are then taken and the backfill marked filled in one atomic store step
(:meth:`BackfillStore.fill_backfill <mgmatch.app.store.BackfillStore.fill_backfill>`): a ticket is never both in a backfill and in a new match.

A fill is all or nothing: a backfill stays open with nothing assigned until one solve fills every
open slot. A backfill whose candidates could not fill it is not tried again until its candidate set
changes or :data:`RETRY_S` passed. Waiting-time relaxations and A/B arms do not apply to backfills.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from mgmatch.core.errors import InvalidInput
from mgmatch.core.instance import parse_instance

from . import metrics
from .ab import plan_for
from .config import PoolConfig
from .engine import Engine, seed_of
from .instances import instance_object
from .store import Backfill, BackfillStore, Ticket

log = logging.getLogger("mgmatch.backfill")

#: backfills one tick tries to fill at most (each is one solve within the pool's budget)
MAX_PER_TICK = 8
#: a backfill whose candidates did not fill it waits this long unless its candidates change
RETRY_S = 2.0


def backfill_instance(pool: PoolConfig, b: Backfill, candidates: list[Ticket],
                      now: float) -> tuple[dict[str, Any], dict[str, str]]:
    """The instance object of one backfill's fill, and candidate player id → ticket id: the candidates'
    pool instance (:func:`~mgmatch.app.instances.instance_object`) with the match's players first,
    each pinned to its team, and each team's size its players plus its open slots."""
    obj, owner = instance_object(pool, candidates, now)
    pinned = [{k: v for k, v in p.items() if k not in ("party", "waited_s")} for p in b.players]
    obj["players"] = pinned + obj["players"]
    obj["rules"] += [{"kind": "linear", "terms": [[pid, j, 1]], "sense": "==", "rhs": 1}
                     for j, team in enumerate(b.teams) for pid in team]
    obj.pop("team_size", None)
    obj["team_sizes"] = [len(team) + n for team, n in zip(b.teams, b.open, strict=True)]
    return obj, owner


def candidates_for(pool: PoolConfig, b: Backfill, queued: list[Ticket], taken: set[str]) -> list[Ticket]:
    """Queued tickets that may fill ``b``: whole tickets that fit an open slot count, no player already
    in the match or taken this tick, longest waiting first, up to the pool's ``max_candidates`` players."""
    existing = {p["id"] for p in b.players}
    widest = max(b.open)
    room = pool.max_candidates - len(existing)
    out: list[Ticket] = []
    seen: set[str] = set()
    for t in queued:
        ids = [p["id"] for p in t.players]
        if t.id in taken or len(ids) > widest or len(ids) > room:
            continue
        if any(pid in existing or pid in seen for pid in ids):
            continue
        out.append(t)
        seen.update(ids)
        room -= len(ids)
        if room <= 0:
            break
    return out


class Backfiller:
    """Fills one pool's open backfills; owned by the pool's :class:`~mgmatch.app.matchmaker.Matchmaker`."""

    def __init__(self, pool: PoolConfig, store: BackfillStore, engine: Engine):
        self.pool, self.store, self.engine = pool, store, engine
        self._barren: dict[str, tuple[frozenset[str], float]] = {}
        self._logged = -1e9

    def reap(self, now: float) -> None:
        expired = self.store.reap_backfills(self.pool.name, now)
        if expired:
            metrics.BACKFILL_EVENTS.labels(self.pool.name, "expired").inc(expired)

    def step(self, window: Callable[[], list[Ticket]], now: float) -> set[str]:
        """Try to fill the pool's open backfills from ``window()`` (the tick's queued tickets, longest
        waiting first; read only when a backfill is open); returns the ids of the tickets taken."""
        pool = self.pool
        open_ = self.store.open_backfills(pool.name, limit=MAX_PER_TICK)
        metrics.BACKFILLS_OPEN.labels(pool.name).set(len(open_))
        live = {b.id for b in open_}
        for bid in [k for k in self._barren if k not in live]:
            del self._barren[bid]
        taken: set[str] = set()
        if not open_:
            return taken
        queued = window()
        for b in open_:
            cands = candidates_for(pool, b, queued, taken)
            if sum(len(t.players) for t in cands) < sum(b.open):
                continue
            ids = frozenset(t.id for t in cands)
            barren = self._barren.get(b.id)
            if barren is not None and barren[0] == ids and now - barren[1] < RETRY_S:
                continue
            got = self._fill(b, cands, now)
            if got:
                taken.update(got)
                self._barren.pop(b.id, None)
            else:
                self._barren[b.id] = (ids, now)
        return taken

    def _fill(self, b: Backfill, cands: list[Ticket], now: float) -> list[str]:
        pool = self.pool
        plan = plan_for(pool, None)
        try:
            obj, owner = backfill_instance(pool, b, cands, now)
            inst = parse_instance(obj, stored=True)
            sol = self.engine.solve(inst, plan, pool.name, seed=seed_of(b.id), start=time.perf_counter())
        except InvalidInput as err:  # e.g. the pool's rules cannot hold for these team sizes: say so once a minute
            if time.monotonic() - self._logged > 60:
                self._logged = time.monotonic()
                log.warning("pool %s: backfill %s cannot be solved: %s", pool.name, b.id, err)
            return []
        if not sol.has_assignment:
            return []
        for j, team in enumerate(b.teams):  # the pins hold in any solution; never commit one that broke them
            if not set(team) <= set(sol.teams[j]):
                log.error("pool %s: backfill %s: the solver moved a pinned player; not filled", pool.name, b.id)
                return []
        assigned = [[pid for pid in team if pid in owner] for team in sol.teams]
        team_of_ticket = {owner[pid]: j for j, team in enumerate(assigned) for pid in team}
        tickets = sorted(team_of_ticket)
        matched_at = time.time()
        results = {tid: {"match_id": b.match_id, "teams": sol.teams, "team": team_of_ticket[tid],
                         "region": sol.region, "method": sol.method, "arm": plan.arm,
                         "model_version": getattr(sol, "model_version", None), "objective": sol.objective,
                         "solver_status": sol.status, "matched_at": matched_at, "backfill_id": b.id}
                   for tid in tickets}
        if not self.store.fill_backfill(pool.name, b.id, tickets, assigned, results):
            metrics.CLAIM_CONFLICTS.labels(pool.name, "backfill").inc()
            return []
        metrics.BACKFILL_EVENTS.labels(pool.name, "filled").inc()
        metrics.BACKFILL_FILL_SECONDS.labels(pool.name).observe(max(0.0, matched_at - b.created_at))
        arm = metrics.NO_ARM
        method = sol.method or plan.method
        metrics.PLAYERS_MATCHED.labels(pool.name, method, arm).inc(sum(len(a) for a in assigned))
        for t in cands:
            if t.id in team_of_ticket:
                metrics.TICKET_WAIT.labels(pool.name, arm).observe(max(0.0, now - t.created_at))
        return tickets
