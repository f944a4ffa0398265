"""Policy ``game_queue`` (Alman–McKay): an incremental game queue over the waiting players decides
when to solve and on whom. The structure is :class:`mgmatch.solvers.game_queue.GameQueue`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from mgmatch.core.errors import InvalidInput

from ..game_queue.structure import GameQueue
from .base import BasePolicy, pop_base_params, pop_int, pop_number, reject_unknown
from .contract import Decision, PoolShape, Waiting


@dataclass
class GameQueuePolicy(BasePolicy):
    """Dispatch policy ``game_queue``: an incremental :class:`GameQueue` over the waiting players.

    Tickets that arrived since the last call are inserted, tickets gone are deleted (O(log n)
    each). When the best game's imbalance is ≤ ``max_imbalance`` the tickets holding the players
    of the ``games`` best disjoint games form the candidate pool (a party ticket joins whole),
    topped up by waiting time and skill proximity to ``max_candidates`` players.
    """

    alpha: float = 1.0
    p: float = 1.0
    q: float = 2.0
    beta: float = 0.0
    games: int = 1
    max_imbalance: float = math.inf
    name: str = "game_queue"
    _gq: GameQueue | None = None
    _k: int = 0
    _owner: dict = field(default_factory=dict)  # player id → ticket id

    @classmethod
    def from_params(cls, params: dict) -> GameQueuePolicy:
        base = pop_base_params(params)
        alpha = pop_number(params, "alpha", 1.0)
        p = pop_number(params, "p", 1.0, minimum=1.0, allow_inf=True)
        q = pop_number(params, "q", 2.0, minimum=1.0, allow_inf=True)
        beta = pop_number(params, "beta", 0.0)
        games = pop_int(params, "games", 1)
        maxi = pop_number(params, "max_imbalance", math.inf, allow_inf=True)
        reject_unknown("game_queue", params)
        return cls(**base, alpha=alpha, p=p, q=q, beta=beta, games=games, max_imbalance=maxi)

    def decide(self, waiting: Sequence[Waiting], shape: PoolShape, now: float) -> Decision:
        if shape.teams != 2 or shape.sizes[0] != shape.sizes[1]:
            raise InvalidInput("sizes", f"the game_queue policy needs two teams of equal size, got {list(shape.sizes)}")
        self.check_fits(shape)
        k = shape.sizes[0]
        if self._gq is None or self._k != k:
            self._gq = GameQueue(k, self.alpha, self.p, self.q, self.beta)
            self._k, self._owner = k, {}
        gq = self._gq
        by_id = {t.ticket_id: t for t in waiting}
        current = {p.id: t.ticket_id for t in waiting for p in t.players}
        for pid in [x for x in self._owner if x not in current]:
            gq.delete(pid)
            del self._owner[pid]
        for t in waiting:
            for p in t.players:
                if p.id not in self._owner:
                    gq.insert(p.id, max(0.0, float(p.skill or 0.0)), t.enqueued_at)
                    self._owner[p.id] = t.ticket_id
        games = gq.best_games(self.games)
        if not games:
            return Decision(False, reason=f"{len(gq)} players: fewer than {2 * k}")
        if games[0].imbalance > self.max_imbalance:
            return Decision(False, reason=f"best game imbalance {games[0].imbalance:.4g} > {self.max_imbalance:g}")
        cands: list[Waiting] = []
        seen: set[str] = set()
        used = 0
        for g in games:
            for pid in g.players:
                tid = current[pid]
                if tid not in seen and used + by_id[tid].size <= self.max_candidates:
                    seen.add(tid)
                    cands.append(by_id[tid])
                    used += by_id[tid].size
        anchor = cands[0]
        for t in self.select(waiting, now, anchor=anchor):
            if t.ticket_id not in seen and used + t.size <= self.max_candidates:
                seen.add(t.ticket_id)
                cands.append(t)
                used += t.size
        return self.decision(cands, shape, now, f"best game imbalance {games[0].imbalance:.4g}",
                             max_matches=len(games))
