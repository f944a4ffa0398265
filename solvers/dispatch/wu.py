"""Policy ``wu`` (Wu, *Dynamic matching with teams*): greedy or patient by Wu's threshold rule.

The model and its closed forms are in :mod:`mgmatch.solvers.wu`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from mgmatch.core.errors import InvalidInput

from ..wu import greedy_is_optimal
from .base import BasePolicy, pop_base_params, pop_number, reject_unknown
from .contract import Decision, PoolShape, Waiting, player_skill, total_players


@dataclass
class WuPolicy(BasePolicy):
    """Greedy or patient by Wu's threshold rule, from the observed share q of high-skill players.

    Greedy matches as soon as 2n wait; patient, with 2n waiting, matches only if a zero-imbalance
    split exists (an even number of high players), else waits for one more arrival. A player is
    *high* when its skill ≥ ``high_skill`` (default: the running mean of all skills seen). q is
    estimated over every distinct ticket seen so far with one pseudo-observation of
    ``prior_q``. Needs two teams of equal size n. ``mode`` forces greedy or patient.
    """

    alpha: float = 1.0
    high_skill: float | None = None
    prior_q: float = 0.5
    mode: str = "auto"
    name: str = "wu"
    _seen: set = field(default_factory=set)
    _skills: list = field(default_factory=list)
    _high: int = 0

    @classmethod
    def from_params(cls, params: dict) -> WuPolicy:
        base = pop_base_params(params)
        alpha = pop_number(params, "alpha", 1.0)
        high = params.pop("high_skill", None)
        if high is not None:
            high = pop_number({"high_skill": high}, "high_skill", 0.0, minimum=None)
        prior_q = pop_number(params, "prior_q", 0.5)
        if prior_q > 1:
            raise InvalidInput("prior_q", f"must be ≤ 1, got {prior_q:g}")
        mode = params.pop("mode", "auto")
        if mode not in ("auto", "greedy", "patient"):
            raise InvalidInput("mode", f"expected auto, greedy or patient, got {mode!r}")
        reject_unknown("wu", params)
        return cls(**base, alpha=alpha, high_skill=high, prior_q=prior_q, mode=mode)

    def observe(self, waiting: Sequence[Waiting]) -> None:
        for t in waiting:
            if t.ticket_id in self._seen:
                continue
            self._seen.add(t.ticket_id)
            for p in t.players:
                self._skills.append(player_skill(p))
                if self.high_skill is not None and player_skill(p) >= self.high_skill:
                    self._high += 1

    def threshold_skill(self) -> float:
        if self.high_skill is not None:
            return self.high_skill
        return sum(self._skills) / len(self._skills) if self._skills else 0.0

    def is_high(self, skill: float) -> bool:
        return skill >= self.threshold_skill()

    def q_hat(self) -> float:
        n = len(self._skills)
        if self.high_skill is not None:
            h = self._high
        else:
            thr = self.threshold_skill()
            h = sum(1 for s in self._skills if s >= thr)
        return (h + self.prior_q) / (n + 1)

    def choose(self, n: int) -> str:
        if self.mode != "auto":
            return self.mode
        return "greedy" if greedy_is_optimal(n, self.q_hat(), self.alpha) else "patient"

    def decide(self, waiting: Sequence[Waiting], shape: PoolShape, now: float) -> Decision:
        if shape.teams != 2 or shape.sizes[0] != shape.sizes[1]:
            raise InvalidInput("sizes", f"the wu policy needs two teams of equal size, got {list(shape.sizes)}")
        self.check_fits(shape)
        self.observe(waiting)
        n = shape.sizes[0]
        have = total_players(waiting)
        mode = self.choose(n)
        if have < 2 * n:
            return Decision(False, reason=f"{mode}: {have} of {2 * n} players waiting")
        highs = sum(1 for t in waiting for p in t.players if self.is_high(player_skill(p)))
        if mode == "patient" and have == 2 * n and highs % 2 == 1:
            return Decision(False, reason=f"patient: {2 * n} waiting with an odd number of high players ({highs}); wait one arrival")
        cands = self.select(waiting, now)
        return self.decision(cands, shape, now, f"{mode} (q≈{self.q_hat():.3f}, α={self.alpha:g}): {have} waiting, {highs} high",
                             max_matches=1)
