"""Wu, *Dynamic matching with teams*: when to match (greedy vs patient).

Model: one player arrives per period, high skill (H) with probability q, low (L) otherwise; a
game is two teams of n; a game with I = |#H team 1 − #H team 2| costs α·I per player (α·I·2n in
all; an optimal split has I ∈ {0, 1}, I = 1 exactly when the 2n players hold an odd number of
H); waiting costs 1 per player per period, charged on the pool *before* each arrival (the
paper's state X_t).

- greedy: match as soon as 2n players wait;
- patient: with 2n waiting, match at once if a zero-imbalance split exists (#H even), else wait
  one period and match 2n of the 2n + 1 with zero imbalance.

Cost per period: patient n; greedy n − ½ + α(1 − (2q − 1)^{2n})/2. Greedy is optimal iff
α ≤ 1/(1 − (2q − 1)^{2n}) (Theorem 3.3).

:class:`WuPolicy` is the dispatch policy ``wu`` (see :mod:`mgmatch.solvers.dispatch`); the
exact simulation lives in :mod:`mgmatch.pipeline.sim_wu`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from mgmatch.core.errors import InvalidInput

from .dispatch import Decision, PoolShape, Waiting, _Base, _check_fits, _skill, total_players


def check_params(n: int, q: float, alpha: float) -> None:
    """Validate Wu's model parameters; InvalidInput names the bad one."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InvalidInput("n", f"team size must be an integer ≥ 1, got {n!r}")
    if not (0.0 <= q <= 1.0):
        raise InvalidInput("q", f"must be in [0, 1], got {q!r}")
    if not (alpha >= 0.0) or math.isinf(alpha):
        raise InvalidInput("alpha", f"must be a finite number ≥ 0, got {alpha!r}")


def odd_probability(n: int, q: float) -> float:
    """P(#H among 2n arrivals is odd) = (1 − (2q − 1)^{2n}) / 2."""
    return (1.0 - (2.0 * q - 1.0) ** (2 * n)) / 2.0


def greedy_threshold(n: int, q: float) -> float:
    """α* = 1 / (1 − (2q − 1)^{2n}); inf when q ∈ {0, 1} (greedy never pays imbalance)."""
    check_params(n, q, 0.0)
    d = 1.0 - (2.0 * q - 1.0) ** (2 * n)
    return math.inf if d <= 0.0 else 1.0 / d


def greedy_is_optimal(n: int, q: float, alpha: float) -> bool:
    """Theorem 3.3: greedy is optimal iff α ≤ 1/(1 − (2q − 1)^{2n}) (ties go to greedy)."""
    check_params(n, q, alpha)
    return alpha <= greedy_threshold(n, q)


def closed_form(policy: str, n: int, q: float, alpha: float) -> float:
    """Expected cost per period of ``greedy`` or ``patient``."""
    check_params(n, q, alpha)
    if policy == "patient":
        return float(n)
    if policy == "greedy":
        return n - 0.5 + alpha * odd_probability(n, q)
    raise InvalidInput("policy", f"expected greedy or patient, got {policy!r}")


# --------------------------------------------------------------------------- dispatch policy


@dataclass
class WuPolicy(_Base):
    """Greedy or patient by Wu's threshold rule, from the observed share q of high-skill players.

    A player is *high* when its skill ≥ ``high_skill`` (default: the running mean of all skills
    seen). q is estimated over every distinct ticket seen so far with one pseudo-observation of
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

    def observe(self, waiting: Sequence[Waiting]) -> None:
        for t in waiting:
            if t.ticket_id in self._seen:
                continue
            self._seen.add(t.ticket_id)
            for p in t.players:
                self._skills.append(_skill(p))
                if self.high_skill is not None and _skill(p) >= self.high_skill:
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
        _check_fits(shape, self.max_candidates)
        self.observe(waiting)
        n = shape.sizes[0]
        have = total_players(waiting)
        mode = self.choose(n)
        if have < 2 * n:
            return Decision(False, reason=f"{mode}: {have} of {2 * n} players waiting")
        highs = sum(1 for t in waiting for p in t.players if self.is_high(_skill(p)))
        if mode == "patient" and have == 2 * n and highs % 2 == 1:
            return Decision(False, reason=f"patient: {2 * n} waiting with an odd number of high players ({highs}); wait one arrival")
        cands = self.select(waiting, now)
        return self.decision(cands, shape, now, f"{mode} (q≈{self.q_hat():.3f}, α={self.alpha:g}): {have} waiting, {highs} high",
                             max_matches=1)
